-- sweep: announce what changed in a type's locks since lockhub last looked (leases
-- that ran out, and every change another program made: PROTOCOL.md §8), and read the
-- live locks.
--
-- Every member is a lock key of the same tenant, so it hashes to the index's slot
-- (the tenant is the hash tag) and may be read here on a cluster too. The script is
-- atomic and takes each announced change into the values hash, so each change is
-- announced by exactly one caller, whichever instance sweeps, and in the same step:
-- no later change of the entity can be announced first.
--
-- KEYS[1]  index key    lockidx:{tenant}:type
-- KEYS[2]  values key   lockval:{tenant}:type
-- KEYS[3]  sweep mark   locksweep:{tenant}:type  (set while a sweep is recent)
-- KEYS[4]  feed key     lockfeed:{tenant}  (hash: command, channel; how another program
--          publishes on the tenant's change feed, kept while the sweeper sweeps the
--          tenant, that is while someone watches it)
-- ARGV[1..6]  the events to publish, the clock, the index margin: see prelude.lua
-- ARGV[7]  the lock key prefix of the index's type: lock:{tenant}:type:
-- ARGV[8], ARGV[9]  a lock of that type with no holder, cut where its uid goes: how a
--          lock that is gone is announced when lockhub never saw its value
-- ARGV[10] "1" to read the live locks (List, Mine), "0" to announce only (the
--          sweeper, which would throw the values away)
-- ARGV[11] ms: with ARGV[10] "0", skip when another sweep of the type ran within
--          this long (so N instances sweep a type about once per interval, not N
--          times); "0" never skips
-- ARGV[12] ms: how long the feed key lives after the last sweep (ARGV[10] "0")
--
-- Returns {found, values}:
--   found   the ops announced, one per event published
--   values  the values of the live locks, read with MGET in this same round trip;
--           empty when ARGV[10] is "0"

local read = ARGV[10] == '1'
if not read and tonumber(ARGV[11]) > 0 then
  if not redis.call('SET', KEYS[3], '1', 'NX', 'PX', ARGV[11]) then return {found, {}} end
end
if not read and ARGV[1] ~= '' then
  redis.call('HSET', KEYS[4], 'command', ARGV[1], 'channel', ARGV[2])
  redis.call('PEXPIRE', KEYS[4], ARGV[12])
end

-- ours says whether k is a lock key of the index's type.
-- foreign returns the lock announced for a key gone without a value copy, from the key
-- alone, or nil when the key is not a lock key of this type with a valid uid
-- (PROTOCOL.md §1): what goes into the JSON is only what that rule lets through.
local function ours(k)
  return string.sub(k, 1, #ARGV[7]) == ARGV[7]
end

local function foreign(k)
  local uid = string.sub(k, #ARGV[7] + 1)
  if #uid < 1 or #uid > 128 or not string.match(uid, '^[A-Za-z0-9_%.:%-]+$') then return nil end
  return ARGV[8] .. uid .. ARGV[9]
end

local now = tonumber(ARGV[5])
local copies, scores, keys = {}, {}, {}
local flat = redis.call('HGETALL', KEYS[2])
for i = 1, #flat, 2 do copies[flat[i]] = flat[i + 1] end
local members = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')
for i = 1, #members, 2 do
  local k = members[i]
  if ours(k) then
    scores[k] = tonumber(members[i + 1])
    keys[#keys + 1] = k
  else
    redis.call('ZREM', KEYS[1], k) -- never read: on a cluster it may be in another slot
  end
end
-- copies whose member is gone: a program released the lock (ZREM, DEL), or the
-- index ran out with it (the .NET claim gives the index the bare lease)
for k in pairs(copies) do
  if scores[k] == nil then
    if ours(k) then keys[#keys + 1] = k else redis.call('HDEL', KEYS[2], k) end
  end
end

local values = {}
-- one MGET, in chunks: unpack is bounded by Lua's C stack
for i = 1, #keys, 1000 do
  local got = redis.call('MGET', unpack(keys, i, math.min(i + 999, #keys)))
  for j = 1, #got do
    local k, v = keys[i + j - 1], got[j]
    local c = copies[k] or false
    if v then
      local lock = v == c or decode(v) ~= nil -- a copy was a lock when it was taken
      if lock and v ~= c then
        if c and decode(c) == nil then c = false end
        changed(k, v, c, KEYS[2])
      end
      if lock and scores[k] == nil then -- back into the index, scored by the key's TTL
        redis.call('ZADD', KEYS[1], now + math.max(redis.call('PTTL', k), 0), k)
      end
      if read then values[#values + 1] = v end
    elseif c and decode(c) ~= nil then
      gone(k, c, KEYS[1], KEYS[2])
    else
      redis.call('ZREM', KEYS[1], k)
      redis.call('HDEL', KEYS[2], k)
      local f = foreign(k)
      if f and scores[k] ~= nil then announce(ended(scores[k]), f) end
    end
  end
end
if #found > 0 or redis.call('PTTL', KEYS[1]) < 0 then
  settle(KEYS[1], KEYS[2])
end
return {found, values}
