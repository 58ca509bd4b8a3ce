-- sweep: prune the index of leases that ran out, announce them, and read the live ones.
--
-- Every member is a lock key of the same tenant, so it hashes to the index's slot
-- (the tenant is the hash tag) and may be read here on a cluster too. Pruning is
-- atomic, so each expired lock is announced by exactly one caller, whichever instance
-- sweeps, and in the same step: no later change of the entity can be announced first.
--
-- KEYS[1]  index key    lockidx:{tenant}:type
-- KEYS[2]  values key   lockval:{tenant}:type
-- ARGV[1..4]  the events to publish: see prelude.lua
-- ARGV[5]  now, Unix ms
-- ARGV[6]  at most this many expired members pruned per call
-- ARGV[7]  the lock key prefix of the index's type: lock:{tenant}:type:
-- ARGV[8], ARGV[9]  a lock of that type with no holder, cut where its uid goes: how a
--          lock written by another program (no value copy here) is announced
-- ARGV[10] "1" to read the live locks (List, Mine), "0" to prune only (the sweeper,
--          which would throw the values away)
--
-- Returns {expired, values}:
--   expired  how many Expired events were published
--   values   the values of the live locks, read with MGET in this same round trip (an
--            entry is false where a key expired in between: simply absent); empty
--            when ARGV[10] is "0"

-- ours says whether k is a lock key of the index's type.
-- foreign returns the lock announced for a key that kept no value copy, from the key
-- alone, or nil when the key is not a lock key of this type with a valid uid
-- (PROTOCOL.md §1): what goes into the JSON is only what that rule lets through.
local function ours(k)
  return string.sub(k, 1, #ARGV[7]) == ARGV[7]
end

local function foreign(k)
  if not ours(k) then return nil end
  local uid = string.sub(k, #ARGV[7] + 1)
  if #uid < 1 or #uid > 128 or not string.match(uid, '^[A-Za-z0-9_%.:%-]+$') then return nil end
  return ARGV[8] .. uid .. ARGV[9]
end

local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[5], 'LIMIT', 0, tonumber(ARGV[6]))
local live, expired = {}, 0
for _, k in ipairs(due) do
  if not ours(k) or redis.call('EXISTS', k) == 0 then -- not a lock of this type: pruned too
    redis.call('ZREM', KEYS[1], k)
    local v = redis.call('HGET', KEYS[2], k)
    redis.call('HDEL', KEYS[2], k)
    v = v or foreign(k)
    if v then
      publish('Expired', v)
      expired = expired + 1
    end
  else
    -- our clock is ahead of Redis's: Redis says it is alive, so it is
    live[#live + 1] = k
  end
end
if ARGV[10] ~= '1' then
  return {expired, {}}
end
for _, k in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. ARGV[5], '+inf')) do
  if ours(k) then
    live[#live + 1] = k
  else
    redis.call('ZREM', KEYS[1], k) -- never read: on a cluster it may be in another slot
  end
end
-- one MGET, in chunks: unpack is bounded by Lua's C stack
local values = {}
for i = 1, #live, 1000 do
  for _, v in ipairs(redis.call('MGET', unpack(live, i, math.min(i + 999, #live)))) do
    values[#values + 1] = v
  end
end
return {expired, values}
