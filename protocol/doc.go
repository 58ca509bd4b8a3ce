// Package protocol is the wire contract of lockhub's WebSocket, PROTOCOL.md §1, §3 and
// §4 written as Go: the frames, their exact JSON, the limits and close codes, the
// decoders the hub runs on every client frame, and a small client for tests and tools.
//
// Start with the frame types in frame.go, then Request (what a client sends), Welcome,
// Result, Snapshot, Error and LockEvent (what the server sends), and Client.
//
// # Protocol flow
//
// A client opens GET /ws with the subprotocol "lockhub.v1" (Subprotocol). Every frame is
// one JSON object in a text message; a client frame is at most MaxFrameSize bytes.
//
// Authentication. Within AuthTimeout (10 s) the first frame must be auth, without an id:
//
//	C: {"type":"auth","token":"<JWT>"}
//	S: {"type":"welcome","connectionId":"..","tenant":"acme","holder":{..},"leaseMs":300000,...}
//
// A bad or expired token closes with CloseNotAuthenticated (4401), no auth in time with
// CloseAuthTimeout (4408), any other frame first with CloseNotAuthenticated.
//
// Requests. Each carries an "id" chosen by the client (a string of at most MaxIDLength
// characters, perhaps empty) and is answered by exactly one frame echoing it: a result,
// a snapshot (for watch) or an error. Requests may be pipelined: match answers by id, not order.
//
//	C: {"id":"7","type":"claim","entityType":"ApprovalRequest","entityUid":"r-1001"}
//	S: {"id":"7","type":"result","outcome":"acquired","lock":{..}}
//
// Watching. watch answers with a snapshot of the live locks of the type, then streams
// every change of that type in the tenant as a lock event, without an id, until
// unwatch. A snapshot without an id is unsolicited: the hub lost Redis and got it
// back, and the snapshot replaces what the watcher knew of that type.
//
//	C: {"id":"9","type":"watch","entityType":"ApprovalRequest"}
//	S: {"id":"9","type":"snapshot","entityType":"ApprovalRequest","locks":[..]}
//	S: {"type":"lock","op":"Acquired","lock":{..},"at":"2026-12-02T09:15:00.123Z"}
//
// Presence (version 2). view answers with the people viewing an entity, one per oid,
// ordered by since, then sends every change of them, without an id, until unview; a
// viewer may nudge the holder, who receives a nudge frame on each socket that views the
// entity.
//
//	C: {"id":"20","type":"view","entityType":"ApprovalRequest","entityUid":"r-1001"}
//	S: {"id":"20","type":"presence","entityType":"ApprovalRequest","entityUid":"r-1001","viewers":[..]}
//	C: {"id":"22","type":"nudge","entityType":"ApprovalRequest","entityUid":"r-1001"}
//	S: {"id":"22","type":"result","outcome":"nudged"}
//	S: {"type":"nudge","entityType":"ApprovalRequest","entityUid":"r-1001","from":{..},"at":".."}   to the holder
//
// The waiting line (version 3). A view with intent edit waits in line while someone
// else holds the lock; each viewer entry carries its state (editing, waiting, looking)
// and a waiting one its position. A freed lock goes to the first in line, whose
// sockets that view with intent edit are told:
//
//	C: {"id":"20","type":"view","entityType":"ApprovalRequest","entityUid":"r-1001","intent":"edit"}
//	S: {"type":"handoff","entityType":"ApprovalRequest","entityUid":"r-1001","lock":{..}}
//
// Claims of many (version 3). claimMany claims 1 to MaxBulk entities of a type, all or
// none; releaseMany releases them:
//
//	C: {"id":"40","type":"claimMany","entityType":"ApprovalRequest","entityUids":["r-1001","r-1002"]}
//	S: {"id":"40","type":"result","outcome":"acquired","locks":[..]}      or "locked" with the locks of others
//	C: {"id":"41","type":"releaseMany","entityType":"ApprovalRequest","entityUids":["r-1001","r-1002"]}
//	S: {"id":"41","type":"result","outcome":"released","count":2}
//
// Refresh. The token is replaced in band, before it expires, by auth with an id. The
// tenant and oid must not change (else CloseForbidden, 4403).
//
//	C: {"id":"12","type":"auth","token":"<fresh JWT>"}
//	S: {"id":"12","type":"result","outcome":"refreshed"}
//
// The lock console (§10). A socket whose token has the admin role lists every live
// lock of its tenant and force releases any of them; the holder's watchers get Released
// with "by". Without the role both answer an error frame with CodeForbidden.
//
//	C: {"id":"30","type":"adminLocks"}
//	S: {"id":"30","type":"result","locks":[..]}
//	C: {"id":"31","type":"forceRelease","entityType":"ApprovalRequest","entityUid":"r-1001"}
//	S: {"id":"31","type":"result","outcome":"released","lock":{..}}
//	S: {"type":"lock","op":"Released","lock":{..},"by":{"oid":"u-root","name":".."},"at":".."}
//
// Bad frames. A frame that is not well formed (malformed JSON, unknown type, a missing
// or mistyped member, a binary message) is answered by an error frame with code
// CodeBadRequest, echoing the id when it could be read, and the connection stays. A
// frame over MaxFrameSize closes with CloseTooLarge (1009).
//
//	S: {"id":"7","type":"error","code":"bad_request","message":"missing entityUid"}
//
// Names. A well-formed frame whose entity type or uid breaks the rules of §1 (ValidType,
// ValidUID) is answered with CodeInvalidEntity, the code of an *InvalidEntityError, and
// nothing is written; a token whose tenant or oid breaks them (ValidTenant, ValidOID)
// is refused like any bad token. The store, both transports and the token checks all
// use these functions.
//
// Closing. Past the rate limit each request gets CodeRateLimited; a client still over
// it RateLimitGrace later is closed with CloseTooMany (4429), as is a client too slow
// to read its frames. A hub shutting down closes with CloseGoingAway (1001): the
// client reconnects, re-authenticates and re-watches, and the snapshots make it whole.
//
// # Concurrency
//
// The frame types are plain values. DecodeRequest and DecodeServerFrame are safe for
// concurrent use and do not retain their input, except ServerFrame.Raw. Every method of
// Client may be called concurrently; see Client.
package protocol
