-- claim: take a free lock, or report who holds it.
--
-- KEYS[1]  lock key     lock:{tenant}:type:uid
-- KEYS[2]  index key    lockidx:{tenant}:type   (sorted set: lock key -> expiry, Unix ms)
-- KEYS[3]  values key   lockval:{tenant}:type   (hash: lock key -> value last stored)
-- KEYS[4]  sockets key  lockconn:{tenant}:type:uid (set: connection ids that claimed it)
-- ARGV[1]  holder oid of the caller
-- ARGV[2]  the new lock value, JSON built by Go (never re-encoded here)
-- ARGV[3]  lease, ms (the key's PX)
-- ARGV[4]  expiry, Unix ms (the index score)
-- ARGV[5]  TTL for the index and values keys, ms (lease plus a margin)
-- ARGV[6]  connection id of the claiming socket, or "" (HTTP)
--
-- Returns {status, value, rev}:
--   status 1  acquired; value = ARGV[2]
--   status 2  the caller already holds it; value = the stored value (Go renews by CAS)
--   status 0  someone else holds it; value = the stored value
--   rev       the server's TIME in microseconds, a string: orders the events of one entity
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

if redis.call('SET', KEYS[1], ARGV[2], 'NX', 'PX', ARGV[3]) then
  redis.call('ZADD', KEYS[2], ARGV[4], KEYS[1])
  redis.call('HSET', KEYS[3], KEYS[1], ARGV[2])
  -- never shorten: the index lives as long as its latest-expiring lock
  local ttl = tonumber(ARGV[5])
  if redis.call('PTTL', KEYS[2]) < ttl then redis.call('PEXPIRE', KEYS[2], ttl) end
  if redis.call('PTTL', KEYS[3]) < ttl then redis.call('PEXPIRE', KEYS[3], ttl) end
  redis.call('DEL', KEYS[4])
  attach(ARGV[6], ARGV[3])
  return {1, ARGV[2], rev}
end

local v = redis.call('GET', KEYS[1])
local ok, d = pcall(cjson.decode, v)
if ok and type(d) == 'table' and d['holderOid'] == ARGV[1] then
  return {2, v, rev}
end
return {0, v, rev}
