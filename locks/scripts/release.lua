-- release: only the holder may drop the lock. Released from a socket, it drops only
-- that socket's share while another socket of the holder still uses the lock: the same
-- person editing it in another tab keeps it (detach.lua is the same rule on close).
--
-- KEYS[1]  lock key     lock:{tenant}:type:uid
-- KEYS[2]  index key    lockidx:{tenant}:type
-- KEYS[3]  values key   lockval:{tenant}:type
-- KEYS[4]  sockets key  lockconn:{tenant}:type:uid
-- ARGV[1..4]  the event to publish: see prelude.lua
-- ARGV[5]  holder oid of the caller
-- ARGV[6]  the index margin, ms (the index outlives its latest lock by this much)
-- ARGV[7]  id of the socket releasing it, or "" (HTTP: the lock is dropped whoever uses it)
--
-- Returns {status, value}, status one of (releaseReply in scripts.go):
--   "released"  dropped, published Released; value = the value that was stored
--   "kept"      the socket let go, but another socket of the holder keeps the lock;
--               nothing published; value = the stored value
--   "notHeld"   gone (value nil) or someone else's (value = the stored value)
local v = redis.call('GET', KEYS[1])
if not v then return {'notHeld', false} end
if not holds(v, ARGV[5]) then return {'notHeld', v} end
if ARGV[7] ~= '' then
  redis.call('SREM', KEYS[4], ARGV[7])
  if redis.call('SCARD', KEYS[4]) > 0 then return {'kept', v} end
end
redis.call('DEL', KEYS[1], KEYS[4])
redis.call('ZREM', KEYS[2], KEYS[1])
redis.call('HDEL', KEYS[3], KEYS[1])
settle(KEYS[2], KEYS[3], ARGV[6])
publish('Released', v)
return {'released', v}
