package locks

import (
	"context"
	"errors"
)

// Store is the lock store of PROTOCOL.md on one Redis: a handle per concept, all over
// one shared core (the client, the scripts, the metrics and the one fail-open path).
// Build it with NewStore; every handle may be used concurrently.
//
// The error convention, the same for every handle: a Redis failure of any kind is
// logged at WARN and counted by Reason inside the store (it fails open), then answered
// as what failing open means for the call:
//
//   - a change (Claim, Renew, Release, Takeover, Detach, ForceRelease, Nudge) answers
//     protocol.OutcomeUnknown with a nil error: the caller goes on without a lock;
//   - a read that only shows (List, ListJSON, Mine, AdminLocks, View's viewers, Get)
//     answers none with a nil error; Sweep, Unview and LeaveViews answer nil: the next
//     sweep or refresh does what this one could not;
//   - a call whose caller must tell "no answer" from an answer (Lookup, Audit,
//     RefreshViews and every Instances call) returns an error that matches
//     ErrUnavailable (errors.Is).
//
// Either way the store has logged and counted the failure: the caller has nothing more
// to log or count.
//
// Every other error is a request that could never succeed, and wrote nothing:
// *InvalidEntityError, *NotLockableError, *TooSoonError (a nudge too soon) and
// *QueryError (an audit query that does not parse). Transports map those to their
// codes through protocol.ClientError.
type Store struct {
	// Locks claims, renews, releases, takes over and lists locks, sweeps what ran out
	// or other programs changed, and runs the change feed (PROTOCOL.md §1–§3, §8).
	Locks *Locks
	// Presence keeps who views an entity, and nudges (PROTOCOL.md §9).
	Presence *Presence
	// Instances keeps the liveness records and holdings of hub instances, and reaps
	// the dead ones (PROTOCOL.md §4, "An instance that dies").
	Instances *Instances
	// Console is the lock console's: every lock of a tenant, the force release and the
	// audit trail (PROTOCOL.md §10).
	Console *Console

	core *core
}

// Locks is the lock operations and their change feed. See Store for the error
// convention.
type Locks struct{ *core }

// Presence is the viewers of entities and nudges. See Store for the error convention.
type Presence struct{ *core }

// Instances is the liveness and holdings of hub instances. See Store for the error
// convention.
type Instances struct{ *core }

// Console is the lock console and the audit trail. See Store for the error convention.
type Console struct{ *core }

// NewStore returns a Store, or an error when cfg is invalid.
func NewStore(cfg Config) (*Store, error) {
	c, err := newCore(cfg)
	if err != nil {
		return nil, err
	}
	return &Store{Locks: &Locks{c}, Presence: &Presence{c}, Instances: &Instances{c}, Console: &Console{c}, core: c}, nil
}

// Ping reports whether Redis answers, for readiness probes: on a cluster, every master.
func (s *Store) Ping(ctx context.Context) error { return s.Locks.Ping(ctx) }

// ErrUnavailable is matched (errors.Is) by the error of a call that failed open where
// the caller must tell "no answer" from an answer (see Store). The store has logged
// and counted it already.
var ErrUnavailable = errors.New("locks: store unavailable")
