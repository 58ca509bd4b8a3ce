-- release: only the holder may drop the lock. Released from a socket, it drops only
-- that socket's share while another socket of the holder still uses the lock: the same
-- person editing it in another tab keeps it (detach.lua is the same rule on close).
--
-- KEYS[1]  lock key     lock:{tenant}:type:uid
-- KEYS[2]  index key    lockidx:{tenant}:type
-- KEYS[3]  values key   lockval:{tenant}:type
-- KEYS[4]  sockets key  lockconn:{tenant}:type:uid
-- KEYS[5]  seen key     lockseen:{tenant}:type  (sorted set: lock key -> its index score last known;
--          optional: see prelude.lua)
-- KEYS[6]  audit key    lockaudit:{tenant}  (stream; optional: see prelude.lua)
-- ARGV[1..6]  the event to publish, the clock, the index margin: see prelude.lua
-- ARGV[7]  holder oid of the caller
-- ARGV[8]  id of the socket releasing it, or "" (HTTP: the lock is dropped whoever uses it)
-- ARGV[9..13] the audit entry: at, cap, actor oid, actor name, reason (prelude.lua); the
--          Released entry's reason is release, or decision (approve, reject)
-- ARGV[14..19] the share block: tenant tag, lockable types, locks per person, locks per
--          tenant, changes a second, burst (prelude.lua); optional
-- ARGV[20] the audit's retention, ms (prelude.lua); optional
-- ARGV[21..25] the line block: clock shift, now, now + lease, lease, presence margin
--          (line.lua); optional: with it a dropped lock goes to the next in line
--
-- Returns {status, value, found, trimmed}, status one of (releaseReply in scripts.go):
--   "released"  dropped, published Released (then, handed to the next in line,
--               Acquired: line.lua); value = the value that was stored
--   "kept"      the socket let go, but another socket of the holder keeps the lock;
--               nothing published; value = the stored value
--   "notHeld"   gone (value nil) or someone else's (value = the stored value)
--   "rateLimited"  it would be dropped, but the caller made as many changes as the
--               share allows; nothing written (the socket keeps its share); value = ms
--               until the next is allowed
auditing(9, 20)
sharing(14)
lining(21)
local v = redis.call('GET', KEYS[1])
catchup(KEYS[1], v, KEYS[2], KEYS[3])
if not v then return reply('notHeld', false) end
if not holds(v, ARGV[7]) then return reply('notHeld', v) end
if ARGV[8] ~= '' then
  local others = redis.call('SCARD', KEYS[4]) - redis.call('SISMEMBER', KEYS[4], ARGV[8])
  if others > 0 then
    redis.call('SREM', KEYS[4], ARGV[8])
    return reply('kept', v)
  end
end
local wait = take(ARGV[7], 1)
if wait > 0 then return reply('rateLimited', tostring(wait)) end
disown(ARGV[7], KEYS[1])
redis.call('DEL', KEYS[1], KEYS[4])
redis.call('ZREM', KEYS[2], KEYS[1])
redis.call('HDEL', KEYS[3], KEYS[1])
unsee(KEYS[1])
settle(KEYS[2], KEYS[3])
publish('Released', v)
record('Released', KEYS[1], v, why, actor)
freed(KEYS[1], KEYS[2], KEYS[3], ARGV[7], true)
return reply('released', v)
