-- sweep: prune the index of leases that ran out, and range the live ones.
--
-- Every member is a lock key of the same tenant, so it hashes to the index's slot
-- (the tenant is the hash tag) and may be read here on a cluster too.
-- Pruning is atomic, so each expired lock is reported by exactly one caller, whichever
-- instance sweeps: that caller publishes its Expired event.
--
-- KEYS[1]  index key    lockidx:{tenant}:type
-- KEYS[2]  values key   lockval:{tenant}:type
-- ARGV[1]  now, Unix ms
-- ARGV[2]  at most this many expired members pruned per call
--
-- Returns {rev, expired, live}:
--   rev      the server's TIME in microseconds, a string
--   expired  flat list {lockKey1, value1, lockKey2, value2, ...}; value "" when unknown
--            (a lock written by another program, which keeps no value copy)
--   live     lock keys whose lease has not run out, for one MGET by the caller
local t = redis.call('TIME')
local rev = t[1] .. string.format('%06d', tonumber(t[2]))

local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
local expired, live = {}, {}
for _, k in ipairs(due) do
  if redis.call('EXISTS', k) == 0 then
    redis.call('ZREM', KEYS[1], k)
    local v = redis.call('HGET', KEYS[2], k)
    redis.call('HDEL', KEYS[2], k)
    expired[#expired + 1] = k
    expired[#expired + 1] = v or ''
  else
    -- our clock is ahead of Redis's: Redis says it is alive, so it is
    live[#live + 1] = k
  end
end
for _, k in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. ARGV[1], '+inf')) do
  live[#live + 1] = k
end
return {rev, expired, live}
