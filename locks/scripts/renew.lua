-- renew: extend the caller's lease, compare-and-set on the exact stored bytes.
--
-- Go read the stored value, checked the holder, and built the new value keeping
-- acquiredAtUtc; this script writes it only if nothing changed in between.
--
-- KEYS[1]  lock key     lock:{tenant}:type:uid
-- KEYS[2]  index key    lockidx:{tenant}:type
-- KEYS[3]  values key   lockval:{tenant}:type
-- KEYS[4]  sockets key  lockconn:{tenant}:type:uid
-- ARGV[1]  holder oid of the caller
-- ARGV[2]  the value Go read (exact bytes)
-- ARGV[3]  the new lock value, JSON built by Go
-- ARGV[4]  lease, ms
-- ARGV[5]  expiry, Unix ms (the index score)
-- ARGV[6]  TTL for the index and values keys, ms
-- ARGV[7]  connection id of the renewing socket, or "" (HTTP)
--
-- Returns {status, value, rev}:
--   status 1  renewed; value = ARGV[3]
--   status 0  lost: gone (value nil) or someone else's (value = the stored value)
--   status 2  still the caller's but changed since Go read it (another tab renewed):
--             value = the stored value; Go retries with it
--   rev       the server's TIME in microseconds, a string
local t = redis.call('TIME')
local rev = t[1] .. string.format('%06d', tonumber(t[2]))
-- remember which socket claimed it, so a closing socket releases it only when no
-- other socket of the holder uses it (see Store.Detach)
local function attach(conn, lease)
  if conn ~= '' then
    redis.call('SADD', KEYS[4], conn)
    redis.call('PEXPIRE', KEYS[4], lease)
  end
end

local v = redis.call('GET', KEYS[1])
if not v then return {0, false, rev} end
local ok, d = pcall(cjson.decode, v)
if not (ok and type(d) == 'table' and d['holderOid'] == ARGV[1]) then
  return {0, v, rev}
end
if v ~= ARGV[2] then return {2, v, rev} end

redis.call('SET', KEYS[1], ARGV[3], 'PX', ARGV[4])
redis.call('ZADD', KEYS[2], ARGV[5], KEYS[1])
redis.call('HSET', KEYS[3], KEYS[1], ARGV[3])
local ttl = tonumber(ARGV[6])
if redis.call('PTTL', KEYS[2]) < ttl then redis.call('PEXPIRE', KEYS[2], ttl) end
if redis.call('PTTL', KEYS[3]) < ttl then redis.call('PEXPIRE', KEYS[3], ttl) end
attach(ARGV[7], ARGV[4])
return {1, ARGV[3], rev}
