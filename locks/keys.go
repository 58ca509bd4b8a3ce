package locks

// Every Redis key lockhub writes, one builder per kind. Every key of a tenant carries
// the tenant as its Redis Cluster hash tag ({<tenant>}), so all of them share one slot
// and one script may touch them together
// (https://redis.io/docs/latest/operate/oss_and_stack/reference/cluster-spec/#hash-tags).
//
//	key                                              type        written by            lives
//	lock:{<tenant>}:<type>:<uid>                     string      every lock write      the lease (PROTOCOL.md §1)
//	lockidx:{<tenant>}:<type>                        sorted set  every lock write      latest lease + indexMargin (§1)
//	lockval:{<tenant>}:<type>                        hash        lock writes, sweep    with the index
//	lockseen:{<tenant>}:<type>                       hash        lock writes, sweep    with the index
//	lockconn:{<tenant>}:<type>:<uid>                 set         claim, renew, detach  the lease
//	locksweep:{<tenant>}:<type>                      string      sweep                 a little under the sweep interval
//	locksweepat:{<tenant>}:<type>                    string      sweep of a big type   10 minutes after the last sweep
//	lockfeed:{<tenant>}                              hash        sweep                 feedKeyTTL after the last sweep
//	lockaudit:{<tenant>}                             stream      every change          AuditRetention, AuditMaxEntries
//	lockview:{<tenant>}:<type>:<uid>                 sorted set  presence.lua          latest view + viewMargin (§9)
//	lockviewer:{<tenant>}:<type>:<uid>               hash        presence.lua          with lockview
//	lockline:{<tenant>}:<type>:<uid>                 hash        presence.lua, line.lua with lockview (§11)
//	lockhand:{<tenant>}:<type>:<uid>                 string      line.lua, handed.lua  the lease
//	locknudge:{<tenant>}:<type>:<uid>/<oid>          string      nudge.lua             the nudge interval
//	lockmine:{<tenant>}:<oid>                        sorted set  every lock write      latest lease + indexMargin (§4)
//	lockrate:{<tenant>}:<oid>                        hash        every counted change  until the bucket is full again (§4)
//	lockhub:instances                                sorted set  Heartbeat, Reap       instanceKeysTTL
//	lockhub:reaped                                   sorted set  Reap, DueReaped       instanceKeysTTL
//	lockhub:held:{<instance>}                        set         UpdateHoldings        instanceKeysTTL
//
// The change feed's channels, lockhub:ev:{<n>} (one of Config.Channels, by tenant hash)
// or, on a cluster, lockhub:ev:{<tag>} (sharded, the tenant's slot), are published to,
// never stored. The demo domain (web/demo), on when development mode is, writes its
// rows under demo:{<tenant>}:ApprovalRequest:<uid> on its own Redis.

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
// it lives as long as the lease (see Locks.Detach).
func ConnsKey(r Ref) string { return "lockconn:{" + r.Tenant + "}:" + r.Type + ":" + r.UID }

// sweepKey returns the key that marks a recent sweep of a tenant's type:
// locksweep:{<tenant>}:<entityType>. Ours; it lives a little less than the sweep
// interval.
func sweepKey(tenant, entityType string) string {
	return "locksweep:{" + tenant + "}:" + entityType
}

// sweepAtKey returns the key of where a type's next sweep call looks (sweep.lua's
// windows): locksweepat:{<tenant>}:<entityType>. Ours.
func sweepAtKey(tenant, entityType string) string {
	return "locksweepat:{" + tenant + "}:" + entityType
}

// FeedKey returns the key of the hash that tells another program how to publish on the
// tenant's change feed: lockfeed:{<tenant>}, fields command (PUBLISH or SPUBLISH) and
// channel. Kept while any type of the tenant is watched, so in the tenant's slot; a
// program that finds no such key has no watcher to tell (the README's "change feed").
func FeedKey(tenant string) string { return "lockfeed:{" + tenant + "}" }

// AuditKey returns the key of a tenant's audit stream: lockaudit:{<tenant>}, in the
// tenant's slot like every other key of it.
func AuditKey(tenant string) string { return "lockaudit:{" + tenant + "}" }

// ViewsKey returns the key of the sorted set of the sockets viewing r, scored by when
// each view runs out (Unix ms): lockview:{<tenant>}:<entityType>:<entityUid>. Ours.
func ViewsKey(r Ref) string { return "lockview:{" + r.Tenant + "}:" + r.Type + ":" + r.UID }

// ViewersKey returns the key of the hash of who each socket viewing r is, and of the
// viewers last announced: lockviewer:{<tenant>}:<entityType>:<entityUid>. Ours; it
// lives and dies with ViewsKey.
func ViewersKey(r Ref) string { return "lockviewer:{" + r.Tenant + "}:" + r.Type + ":" + r.UID }

// LineKey returns the key of the waiting line of r (version 3, PROTOCOL.md §11):
// lockline:{<tenant>}:<entityType>:<entityUid>, a hash of the sockets viewing r with
// intent edit: socket id -> "<waiting since ms>\t<oid>\t<lock head>". Ours; it lives
// and dies with ViewsKey. line.lua builds it, and lockhand:, from the lock key.
func LineKey(r Ref) string { return "lockline:{" + r.Tenant + "}:" + r.Type + ":" + r.UID }

// handKey returns the key naming the socket a hand-off gave r's lock to:
// lockhand:{<tenant>}:<entityType>:<entityUid>. Ours; it lives as long as the lease.
func handKey(r Ref) string { return "lockhand:{" + r.Tenant + "}:" + r.Type + ":" + r.UID }

// nudgeKey returns the key that bars oid from nudging r's holder again for a while:
// locknudge:{<tenant>}:<entityType>:<entityUid>/<oid>. Ours. Uids and oids may both
// hold ':', never '/': the slash keeps (uid "a:b", oid "c") and (uid "a", oid "b:c")
// apart.
func nudgeKey(r Ref, oid string) string {
	return "locknudge:{" + r.Tenant + "}:" + r.Type + ":" + r.UID + "/" + oid
}

// personKey returns the key of a person's index: lockmine:{<tenant>}:<oid>, a sorted
// set of the person's lock keys scored by expiry (Unix ms). Ours: what mine reads and
// the person's quota counts (PROTOCOL.md §4). The scripts build it, and the person's
// bucket of changes lockrate:{<tenant>}:<oid>, from the tenant's tag (prelude.lua).
func personKey(tenant, oid string) string { return "lockmine:{" + tenant + "}:" + oid }

const (
	instancesKey = "lockhub:instances"
	reapedKey    = "lockhub:reaped" // instance id -> when its holdings are due for detaching
)

// heldKey returns the key of an instance's holdings: lockhub:held:{<instance>}.
func heldKey(instance string) string { return "lockhub:held:{" + instance + "}" }

const channelPrefix = "lockhub:ev:{"
