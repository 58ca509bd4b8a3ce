package protocol

// Lock is the lock record of PROTOCOL.md §1, exactly as stored under its Redis key and
// as carried by every frame. Field order and names are part of the contract: the .NET
// service deserializes the same bytes.
//
//	{"entityType":"ApprovalRequest","entityUid":"r-1001","holderOid":"u-ada","holderName":"Ada Lovelace",
//	 "acquiredAtUtc":"2026-12-02T09:15:00.123Z","expiresAtUtc":"2026-12-02T09:20:00.123Z"}
type Lock struct {
	EntityType string `json:"entityType"`
	EntityUID  string `json:"entityUid"`
	HolderOID  string `json:"holderOid"`
	HolderName string `json:"holderName"`
	AcquiredAt Time   `json:"acquiredAtUtc"`
	ExpiresAt  Time   `json:"expiresAtUtc"`
}

// Holder is a person who holds, or held, a lock: the token's oid and display name.
type Holder struct {
	OID  string `json:"oid"`
	Name string `json:"name"`
}

// Holder returns who holds l.
func (l *Lock) Holder() Holder { return Holder{OID: l.HolderOID, Name: l.HolderName} }

// Op is what happened to a lock, as carried by a LockEvent.
type Op string

// The operations of a change event (PROTOCOL.md §3).
const (
	OpAcquired  Op = "Acquired"
	OpRenewed   Op = "Renewed"
	OpReleased  Op = "Released"
	OpTakenOver Op = "TakenOver"
	OpExpired   Op = "Expired"
)

// Outcome is the answer of a lock operation (PROTOCOL.md §2).
type Outcome string

// The outcomes of PROTOCOL.md §2, plus the socket-only answers of §4.
const (
	OutcomeAcquired  Outcome = "acquired"  // claim, takeover of a free entity
	OutcomeRenewed   Outcome = "renewed"   // claim by the holder, renew
	OutcomeLocked    Outcome = "locked"    // claim: someone else holds it; the lock is returned
	OutcomeLost      Outcome = "lost"      // renew: gone or someone else's
	OutcomeReleased  Outcome = "released"  // release
	OutcomeNotHeld   Outcome = "notHeld"   // release of a lock the caller does not hold
	OutcomeTakenOver Outcome = "takenOver" // takeover; the previous holder is returned
	OutcomeForbidden Outcome = "forbidden" // takeover without the role
	OutcomeUnknown   Outcome = "unknown"   // the store is unavailable: fail open

	OutcomeUnwatched Outcome = "unwatched" // socket: unwatch
	OutcomeRefreshed Outcome = "refreshed" // socket: in-band token refresh
	OutcomeUnviewed  Outcome = "unviewed"  // socket: unview (version 2, §9)
	OutcomeNudged    Outcome = "nudged"    // socket: nudge; notHeld when nobody else holds it
)
