-- release: only the holder may drop the lock.
--
-- KEYS[1]  lock key     lock:{tenant}:type:uid
-- KEYS[2]  index key    lockidx:{tenant}:type
-- KEYS[3]  values key   lockval:{tenant}:type
-- KEYS[4]  sockets key  lockconn:{tenant}:type:uid
-- ARGV[1]  holder oid of the caller
--
-- Returns {status, value, rev}:
--   status 1  released; value = the value that was stored
--   status 0  not held: gone (value nil) or someone else's (value = the stored value)
--   rev       the server's TIME in microseconds, a string
local t = redis.call('TIME')
local rev = t[1] .. string.format('%06d', tonumber(t[2]))

local v = redis.call('GET', KEYS[1])
if not v then return {0, false, rev} end
local ok, d = pcall(cjson.decode, v)
if not (ok and type(d) == 'table' and d['holderOid'] == ARGV[1]) then
  return {0, v, rev}
end
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], KEYS[1])
redis.call('HDEL', KEYS[3], KEYS[1])
redis.call('DEL', KEYS[4])
return {1, v, rev}
