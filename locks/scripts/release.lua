-- release: only the holder may drop the lock.
--
-- KEYS[1]  lock key     lock:{tenant}:type:uid
-- KEYS[2]  index key    lockidx:{tenant}:type
-- KEYS[3]  values key   lockval:{tenant}:type
-- KEYS[4]  sockets key  lockconn:{tenant}:type:uid
-- ARGV[1..4]  the event to publish: see prelude.lua
-- ARGV[5]  holder oid of the caller
-- ARGV[6]  the index margin, ms (the index outlives its latest lock by this much)
--
-- Returns {status, value}:
--   1  released, published Released; value = the value that was stored
--   0  not held: gone (value nil) or someone else's (value = the stored value)
local v = redis.call('GET', KEYS[1])
if not v then return {0, false} end
if not holds(v, ARGV[5]) then return {0, v} end
redis.call('DEL', KEYS[1], KEYS[4])
redis.call('ZREM', KEYS[2], KEYS[1])
redis.call('HDEL', KEYS[3], KEYS[1])
settle(KEYS[2], KEYS[3], ARGV[6])
publish('Released', v)
return {1, v}
