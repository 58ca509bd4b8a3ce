-- forcerelease: an administrator drops a lock whoever holds it (the lock console,
-- PROTOCOL.md §10; the caller's role was checked in Go). Every socket of the holder
-- loses it at once, and the event says who released it.
--
-- KEYS[1]  lock key     lock:{tenant}:type:uid
-- KEYS[2]  index key    lockidx:{tenant}:type
-- KEYS[3]  values key   lockval:{tenant}:type
-- KEYS[4]  sockets key  lockconn:{tenant}:type:uid
-- KEYS[5]  seen key     lockseen:{tenant}:type  (sorted set: lock key -> its index score last known;
--          optional: see prelude.lua)
-- KEYS[6]  audit key    lockaudit:{tenant}  (stream; optional: see prelude.lua)
-- ARGV[1..6]  the event to publish, the clock, the index margin: see prelude.lua
-- ARGV[7]  the administrator's oid, named in the event as "by"
-- ARGV[8]  the administrator's name
-- ARGV[9..13] the audit entry: at, cap, actor oid, actor name, reason (prelude.lua); the
--          actor is the administrator, the reason admin (holder and previous: whose
--          lock it was)
-- ARGV[14..19] the share block: tenant tag, lockable types, locks per person, locks per
--          tenant, changes a second, burst (prelude.lua); optional
--          (the administrator's changes are counted as anyone's)
-- ARGV[20] the audit's retention, ms (prelude.lua); optional
-- ARGV[21..25] the line block: clock shift, now, now + lease, lease, presence margin
--          (line.lua); optional: with it a dropped lock goes to the next in line
--
-- Returns {status, value, found, trimmed}, status one of (forceReleaseReply in scripts.go):
--   "released"  dropped, published Released with "by", recorded ForceReleased;
--               value = the value that was stored
--   "notHeld"   free, or a value that is not a lock (left alone); value nil
--   "rateLimited"  the administrator made as many changes as the share allows; nothing
--               written; value = ms until the next is allowed
auditing(9, 20)
sharing(14)
lining(21)
local v = redis.call('GET', KEYS[1])
catchup(KEYS[1], v, KEYS[2], KEYS[3])
if not v or decode(v) == nil then return reply('notHeld', false) end
local wait = take(ARGV[7], 1)
if wait > 0 then return reply('rateLimited', tostring(wait)) end
disown(decode(v)['holderOid'], KEYS[1])
redis.call('DEL', KEYS[1], KEYS[4])
redis.call('ZREM', KEYS[2], KEYS[1])
redis.call('HDEL', KEYS[3], KEYS[1])
unsee(KEYS[1])
settle(KEYS[2], KEYS[3])
publish('Released', v, ',"by":' .. person(ARGV[7], ARGV[8]))
record('ForceReleased', KEYS[1], v, why, actor, whose(decode(v)))
freed(KEYS[1], KEYS[2], KEYS[3], decode(v)['holderOid'], true)
return reply('released', v)
