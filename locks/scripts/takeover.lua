-- takeover: replace whoever holds the lock with the caller (the caller's role was
-- checked in Go).
--
-- KEYS[1]  lock key     lock:{tenant}:type:uid
-- KEYS[2]  index key    lockidx:{tenant}:type
-- KEYS[3]  values key   lockval:{tenant}:type
-- KEYS[4]  sockets key  lockconn:{tenant}:type:uid
-- ARGV[1]  holder oid of the caller
-- ARGV[2]  the new lock value, JSON built by Go
-- ARGV[3]  lease, ms
-- ARGV[4]  expiry, Unix ms (the index score)
-- ARGV[5]  TTL for the index and values keys, ms
-- ARGV[6]  connection id of the socket taking over, or "" (HTTP)
--
-- Returns {status, value, rev}:
--   status 1  taken over; value = the previous value
--   status 3  it was free and is now the caller's; value nil
--   status 2  the caller already holds it; value = the stored value (Go renews by CAS)
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
if v then
  local ok, d = pcall(cjson.decode, v)
  if ok and type(d) == 'table' and d['holderOid'] == ARGV[1] then
    return {2, v, rev}
  end
end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
redis.call('ZADD', KEYS[2], ARGV[4], KEYS[1])
redis.call('HSET', KEYS[3], KEYS[1], ARGV[2])
local ttl = tonumber(ARGV[5])
if redis.call('PTTL', KEYS[2]) < ttl then redis.call('PEXPIRE', KEYS[2], ttl) end
if redis.call('PTTL', KEYS[3]) < ttl then redis.call('PEXPIRE', KEYS[3], ttl) end
-- the previous holder's sockets no longer hold it
redis.call('DEL', KEYS[4])
attach(ARGV[6], ARGV[3])
if v then return {1, v, rev} end
return {3, false, rev}
