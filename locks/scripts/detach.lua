-- detach: a socket that claimed a lock is gone; release the lock if no other socket of
-- its holder uses it.
--
-- Each socket that claims, renews or takes over a lock adds its id to the lock's
-- sockets set; this removes one. When release is asked and the set is then empty, the
-- lock is released as release.lua would. The same person in two tabs is one holder with
-- two sockets: closing one tab leaves the other's id, so the lock stays.
--
-- KEYS[1]  lock key     lock:{tenant}:type:uid
-- KEYS[2]  index key    lockidx:{tenant}:type
-- KEYS[3]  values key   lockval:{tenant}:type
-- KEYS[4]  sockets key  lockconn:{tenant}:type:uid
-- KEYS[5]  seen key     lockseen:{tenant}:type  (sorted set: lock key -> its index score last known;
--          optional: see prelude.lua)
-- KEYS[6]  audit key    lockaudit:{tenant}  (stream; optional: see prelude.lua)
-- ARGV[1..6]  the event to publish, the clock, the index margin: see prelude.lua
-- ARGV[7]  holder oid of the socket's user
-- ARGV[8]  id of the socket that is gone
-- ARGV[9]  "1" to release when no socket is left, "0" to only forget the socket
--          (a graceful shutdown: its clients reconnect elsewhere and claim again)
-- ARGV[10..14] the audit entry: at, cap, actor oid, actor name, reason (prelude.lua); the
--          Released entry's reason is disconnect, its actor the holder (whose socket went)
-- ARGV[15..20] the share block: tenant tag, lockable types, locks per person, locks per
--          tenant, changes a second, burst (prelude.lua); optional
--          (a release on disconnect is never refused: it only keeps the person's index)
-- ARGV[21] the audit's retention, ms (prelude.lua); optional
-- ARGV[22..26] the line block: clock shift, now, now + lease, lease, presence margin
--          (line.lua); optional: with it a dropped lock goes to the next in line
--
-- Returns {status, value, found, trimmed}, status one of (detachReply in scripts.go):
--   "released"  no socket was left, so it was dropped, published Released;
--               value = the value that was stored
--   "kept"      the socket is forgotten and the lock left as it is: the socket was not
--               in the set, release was not asked, or another socket uses it; value nil
--   "notHeld"   the socket was the last, but the lock is gone (value nil) or someone
--               else's (value = the stored value)
-- A socket that is not in the set has no say: the lock was claimed afresh since
-- (a new lease clears the set), or taken over, or claimed over HTTP.
auditing(10, 21)
sharing(15)
lining(22)
local v = redis.call('GET', KEYS[1])
catchup(KEYS[1], v, KEYS[2], KEYS[3])
if redis.call('SREM', KEYS[4], ARGV[8]) == 0 then return reply('kept', false) end
if ARGV[9] ~= '1' or redis.call('SCARD', KEYS[4]) > 0 then return reply('kept', false) end

if not v then return reply('notHeld', false) end
if not holds(v, ARGV[7]) then return reply('notHeld', v) end
disown(ARGV[7], KEYS[1])
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], KEYS[1])
redis.call('HDEL', KEYS[3], KEYS[1])
unsee(KEYS[1])
settle(KEYS[2], KEYS[3])
publish('Released', v)
local d = decode(v)
record('Released', KEYS[1], v, why, person(d['holderOid'], d['holderName']))
freed(KEYS[1], KEYS[2], KEYS[3], ARGV[7], true)
return reply('released', v)
