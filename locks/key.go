package locks

// Ref names one lockable entity of one tenant. Build keys from a Ref only after
// Validate has accepted it.
type Ref struct {
	Tenant string
	Type   string
	UID    string
}

// String returns "tenant/Type/uid", for logs.
func (r Ref) String() string { return r.Tenant + "/" + r.Type + "/" + r.UID }

// Validate checks r against PROTOCOL.md §1: tenant and type [A-Za-z0-9_.-]{1,64},
// uid [A-Za-z0-9_.:-]{1,128}. No accepted part can hold a brace, so the tenant is
// always the whole hash tag of every key built from it.
func (r Ref) Validate() error {
	if !validName(r.Tenant, 64, false) {
		return &InvalidEntityError{Field: "tenant", Value: r.Tenant}
	}
	if !validName(r.Type, 64, false) {
		return &InvalidEntityError{Field: "entityType", Value: r.Type}
	}
	if !validName(r.UID, 128, true) {
		return &InvalidEntityError{Field: "entityUid", Value: r.UID}
	}
	return nil
}

// ValidTenant reports whether s may be a tenant (PROTOCOL.md §1).
func ValidTenant(s string) bool { return validName(s, 64, false) }

// ValidOID reports whether s may be a holder's oid: it follows the uid rule.
func ValidOID(s string) bool { return validName(s, 128, true) }

// ValidType reports whether s may be an entity type name.
func ValidType(s string) bool { return validName(s, 64, false) }

// validName is a hand-written [A-Za-z0-9_.-] (plus ':' when colon) check: it runs on
// every request, and a loop over bytes is several times faster than a regexp.
func validName(s string, max int, colon bool) bool {
	if len(s) == 0 || len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '_', c == '.', c == '-':
		case c == ':' && colon:
		default:
			return false
		}
	}
	return true
}

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
