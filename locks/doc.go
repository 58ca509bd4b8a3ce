// Package locks is lockhub's lock store: edit locks on any entity type, kept in Redis
// as PROTOCOL.md §1–§3 describe, without touching the entity's own tables.
//
// Start with NewStore. A Store is one handle per concept over one shared Redis core
// (store.go, core.go): Locks (Claim, Renew, Release, Takeover, Get, List, Mine, the
// sweep and the change feed), Presence (views and nudges), Instances (liveness and
// holdings of hub instances) and Console (the lock console and the audit trail). A
// Member (member.go) is one hub instance's side of Instances: its holdings, its
// heartbeat and its share of reaping the instances that died. keys.go lists every key
// the store writes. A lock is one JSON value under lock:{<tenant>}:<type>:<uid> whose TTL is the
// lease; lockidx:{<tenant>}:<type> indexes a tenant's locks of one type by expiry, so
// listing by type is a prune, a range and one MGET however many rows a grid shows. The
// tenant is a Redis Cluster hash tag in every key: all of a tenant's keys share one
// slot, so a script may touch a lock and its index, and one MGET may read many locks.
// Every write is a Lua script (scripts/*.lua); Go builds every value, Lua only reads
// holderOid.
//
// Only registered types may be locked (Registry); anything else is refused with a
// *NotLockableError naming the registered types. Names that fail §1's rules are refused
// with an *InvalidEntityError before any key is built.
//
// Fail open: a Redis failure of any kind is logged at WARN and counted by Reason inside
// the store, then answered by the one convention Store documents: changes answer
// protocol.OutcomeUnknown, reads that only show answer none, and the calls whose
// caller must tell "no answer" from an answer return ErrUnavailable. Each operation is
// bounded by Config.Timeout.
//
// Every write script publishes its change on Redis pub/sub (sharded on a cluster) in the
// same atomic step; RunFeed receives the changes of every instance, in order per
// entity. Sweep (and List) prune leases that ran out and announce each as Expired,
// exactly once across instances. ListJSON, a watch's snapshot, only reads: the types
// it is read for are watched, so swept.
//
// Every change but a renewal is also recorded, by the same script and in the same
// atomic step, in the tenant's audit stream lockaudit:{<tenant>} (audit.go, PROTOCOL.md
// §10), kept for Config.AuditRetention and at most Config.AuditMaxEntries; Audit reads
// it, AdminLocks and ForceRelease are the lock console's operations (console.go).
//
// The waiting line (line.go, scripts/line.lua, PROTOCOL.md §11): a socket viewing with
// intent edit waits in the entity's line, and every script that finds a lock free
// hands it to the first person in line within the quotas, in the same atomic step, and
// publishes a handoff for the hubs; every script that changes a holder announces the
// viewers with their states (scripts/people.lua). ClaimMany and ReleaseMany (many.go)
// change up to protocol.MaxBulk entities of one type in one script, all or nothing.
//
// Concurrency: a Store is safe for concurrent use. RunFeed, and a Member's Run, block
// until their ctx is done and join every goroutine they start.
package locks
