package locks

import "github.com/lockhub/lockhub/protocol"

// Ref names one lockable entity of one tenant. Build keys from a Ref only after
// Validate has accepted it.
type Ref struct {
	Tenant string
	Type   string
	UID    string
}

// String returns "tenant/Type/uid", for logs.
func (r Ref) String() string { return r.Tenant + "/" + r.Type + "/" + r.UID }

// Validate checks r against the names of PROTOCOL.md §1 (protocol.ValidTenant,
// ValidType, ValidUID): the first part that fails, in the order tenant, type, uid, is
// the *InvalidEntityError. No accepted part can hold a brace, so the tenant is always
// the whole hash tag of every key built from it.
func (r Ref) Validate() error {
	if !protocol.ValidTenant(r.Tenant) {
		return &InvalidEntityError{Field: "tenant", Value: r.Tenant}
	}
	if !protocol.ValidType(r.Type) {
		return &InvalidEntityError{Field: "entityType", Value: r.Type}
	}
	if !protocol.ValidUID(r.UID) {
		return &InvalidEntityError{Field: "entityUid", Value: r.UID}
	}
	return nil
}

// ValidTenant is protocol.ValidTenant, kept for this package's callers.
func ValidTenant(s string) bool { return protocol.ValidTenant(s) }

// ValidOID is protocol.ValidOID, kept for this package's callers.
func ValidOID(s string) bool { return protocol.ValidOID(s) }

// ValidType is protocol.ValidType, kept for this package's callers.
func ValidType(s string) bool { return protocol.ValidType(s) }

// LockKey returns the key of r's lock: lock:{<tenant>}:<entityType>:<entityUid>.
// The braces are a Redis Cluster hash tag, so every key of a tenant lives in one slot
// (https://redis.io/docs/latest/operate/oss_and_stack/reference/cluster-spec/#hash-tags).
func LockKey(r Ref) string { return lockKeyPrefix(r.Tenant, r.Type) + r.UID }

// lockKeyPrefix returns what every lock key of a tenant's type starts with:
// lock:{<tenant>}:<entityType>:.
func lockKeyPrefix(tenant, entityType string) string {
	return "lock:{" + tenant + "}:" + entityType + ":"
}

// IndexKey returns the key of the index of a tenant's locks of one type:
// lockidx:{<tenant>}:<entityType>, a sorted set of lock keys scored by expiry (Unix ms).
func IndexKey(tenant, entityType string) string { return "lockidx:{" + tenant + "}:" + entityType }

// ValuesKey returns the key of the hash that keeps, per lock key, the value last stored
// there: lockval:{<tenant>}:<entityType>. It is ours, not the contract's: when a lease
// runs out Redis drops the value with the key, and the Expired event still has to say
// whose lock ran out. It lives and dies with the index.
func ValuesKey(tenant, entityType string) string { return "lockval:{" + tenant + "}:" + entityType }

// seenKey returns the key of the hash that keeps, per lock key whose value ValuesKey
// holds, the index score lockhub last knew for it: lockseen:{<tenant>}:<entityType>.
// Ours: every writer of PROTOCOL.md §1 moves the score when it changes a lock, so a
// sweep compares scores and reads only the locks whose score moved (sweep.lua). It
// holds the same keys as the values hash and lives and dies with it.
func seenKey(tenant, entityType string) string { return "lockseen:{" + tenant + "}:" + entityType }

// ConnsKey returns the key of the set of connection ids of the sockets that claimed
// r's lock: lockconn:{<tenant>}:<entityType>:<entityUid>. Ours, not the contract's;
// it lives as long as the lease (see Store.Detach).
func ConnsKey(r Ref) string { return "lockconn:{" + r.Tenant + "}:" + r.Type + ":" + r.UID }

// sweepKey returns the key that marks a recent sweep of a tenant's type:
// locksweep:{<tenant>}:<entityType>. Ours; it lives a little less than the sweep
// interval.
func sweepKey(tenant, entityType string) string {
	return "locksweep:{" + tenant + "}:" + entityType
}

// FeedKey returns the key of the hash that tells another program how to publish on the
// tenant's change feed: lockfeed:{<tenant>}, fields command (PUBLISH or SPUBLISH) and
// channel. Kept while any type of the tenant is watched, so in the tenant's slot; a
// program that finds no such key has no watcher to tell (the README's "change feed").
func FeedKey(tenant string) string { return "lockfeed:{" + tenant + "}" }
