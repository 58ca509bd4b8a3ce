package protocol

// FrameType is the "type" member of every frame.
type FrameType string

// Frame types. C: sent by the client, S: sent by the server. See doc.go for the flow.
const (
	// C: {"type":"auth","token":"<JWT>"}; with an "id", an in-band token refresh.
	FrameAuth FrameType = "auth"
	// S: {"type":"welcome","connectionId":"..","tenant":"..","holder":{..},"leaseMs":..,"renewMs":..,
	// "serverTime":"..Z","lockable":[..],"canTakeOver":false}
	FrameWelcome FrameType = "welcome"
	// C: {"id":"7","type":"claim","entityType":"..","entityUid":".."}
	FrameClaim FrameType = "claim"
	// C: {"id":"8","type":"renew","entityType":"..","entityUid":".."}
	FrameRenew FrameType = "renew"
	// C: {"id":"8","type":"release","entityType":"..","entityUid":".."}
	FrameRelease FrameType = "release"
	// C: {"id":"8","type":"takeover","entityType":"..","entityUid":".."}
	FrameTakeover FrameType = "takeover"
	// C: {"id":"9","type":"watch","entityType":".."}
	FrameWatch FrameType = "watch"
	// C: {"id":"10","type":"unwatch","entityType":".."}
	FrameUnwatch FrameType = "unwatch"
	// C: {"id":"11","type":"mine"}
	FrameMine FrameType = "mine"
	// C: {"id":"13","type":"ping"}: is the hub there? (version 2)
	FramePing FrameType = "ping"
	// S: {"id":"13","type":"pong","serverTime":"..Z"}
	FramePong FrameType = "pong"
	// S: {"id":"7","type":"result","outcome":"acquired","lock":{..}}
	FrameResult FrameType = "result"
	// S: {"id":"9","type":"snapshot","entityType":"..","locks":[..]}
	FrameSnapshot FrameType = "snapshot"
	// C: {"id":"30","type":"adminLocks"}: every live lock of the tenant (admin role, §10)
	FrameAdminLocks FrameType = "adminLocks"
	// C: {"id":"31","type":"forceRelease","entityType":"..","entityUid":".."} (admin role, §10)
	FrameForceRelease FrameType = "forceRelease"
	// S: {"type":"lock","op":"Acquired","lock":{..},"at":"..Z"}
	FrameLock FrameType = "lock"
	// S: {"id":"..","type":"error","code":"bad_request","message":".."}
	FrameError FrameType = "error"

	// Presence and nudges (version 2, PROTOCOL.md §9).

	// C: {"id":"20","type":"view","entityType":"..","entityUid":"..","intent":"edit"}
	// "intent" (version 3, §9) is "edit" or "look", the default; a view of an entity
	// the socket views already changes its intent
	FrameView FrameType = "view"
	// C: {"id":"21","type":"unview","entityType":"..","entityUid":".."}
	FrameUnview FrameType = "unview"
	// S: {"id":"20","type":"presence","entityType":"..","entityUid":"..",
	//    "viewers":[{"oid":"..","name":"..","since":"..Z","state":"waiting","position":1}]}
	// answers view; without an id, every change of the entity's viewers
	FramePresence FrameType = "presence"
	// C: {"id":"22","type":"nudge","entityType":"..","entityUid":".."}
	// S: {"type":"nudge","entityType":"..","entityUid":"..","from":{"oid":"..","name":".."},"at":"..Z"}
	// to the holder's sockets that view the entity
	FrameNudge FrameType = "nudge"

	// The waiting line and claims of many entities (version 3, PROTOCOL.md §11, §12).

	// S: {"type":"handoff","entityType":"..","entityUid":"..","lock":{..}}
	// to every socket of the new holder that views the entity with intent edit, when a
	// freed lock went to them as the first in line
	FrameHandoff FrameType = "handoff"
	// C: {"id":"40","type":"claimMany","entityType":"..","entityUids":["r-1001","r-1002"]}
	// S: {"id":"40","type":"result","outcome":"acquired"|"locked"|"unknown","locks":[..]}
	FrameClaimMany FrameType = "claimMany"
	// C: {"id":"41","type":"releaseMany","entityType":"..","entityUids":[..]}
	// S: {"id":"41","type":"result","outcome":"released"|"unknown","count":12}
	FrameReleaseMany FrameType = "releaseMany"
)
