-- sweep: prune the index of leases that ran out, announce them, and read the live ones.
--
-- Every member is a lock key of the same tenant, so it hashes to the index's slot
-- (the tenant is the hash tag) and may be read here on a cluster too. Pruning is
-- atomic, so each expired lock is announced by exactly one caller, whichever instance
-- sweeps.
--
-- KEYS[1]  index key    lockidx:{tenant}:type
-- KEYS[2]  values key   lockval:{tenant}:type
-- ARGV[1..4]  the events to publish: see prelude.lua
-- ARGV[5]  now, Unix ms
-- ARGV[6]  at most this many expired members pruned per call
--
-- Returns {unannounced, values}:
--   unannounced  lock keys that ran out with no value copy (written by another
--                program): Go announces them from the key alone
--   values       the values of the live locks, read with MGET in this same round trip
--                (an entry is false where a key expired in between: simply absent)
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[5], 'LIMIT', 0, tonumber(ARGV[6]))
local unannounced, live = {}, {}
for _, k in ipairs(due) do
  if redis.call('EXISTS', k) == 0 then
    redis.call('ZREM', KEYS[1], k)
    local v = redis.call('HGET', KEYS[2], k)
    redis.call('HDEL', KEYS[2], k)
    if v then publish('Expired', v) else unannounced[#unannounced + 1] = k end
  else
    -- our clock is ahead of Redis's: Redis says it is alive, so it is
    live[#live + 1] = k
  end
end
for _, k in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. ARGV[5], '+inf')) do
  live[#live + 1] = k
end
-- one MGET, in chunks: unpack is bounded by Lua's C stack
local values = {}
for i = 1, #live, 1000 do
  for _, v in ipairs(redis.call('MGET', unpack(live, i, math.min(i + 999, #live)))) do
    values[#values + 1] = v
  end
end
return {unannounced, values}
