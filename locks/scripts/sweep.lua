-- sweep: announce what changed in a type's locks since lockhub last looked (leases
-- that ran out, and every change another program made: PROTOCOL.md §8), and read the
-- live locks.
--
-- What it reads. Every writer that keeps PROTOCOL.md §1's layout moves a lock's index
-- score when it changes the lock (claim: ZADD; renew, takeover: a new score; release:
-- ZREM), so the seen set (KEYS[5], a sorted set: lock key -> the index score lockhub
-- last knew, kept in step with the values hash by every script, see prelude.lua) says
-- which locks may have changed without reading them. The sweep ranges the index and
-- the seen set with their scores (keys and numbers, no values); both are sorted the
-- same way, so when nothing changed they are equal element by element and the sweep
-- reads only the members whose score is due (not later than now + 1 s: the lease may
-- have run out without any writer touching the index). Otherwise it reads a lock key
-- and its copy only for a candidate: a member whose score differs from its seen score,
-- a member not seen, a seen key no longer in the index, or a due member. Each candidate
-- goes through the full comparison (changed, gone, a foreign expiry), as every member
-- did before the seen set.
--
-- What it does not see at once: a change that leaves the index score as it was (not
-- §1's layout: SET KEEPTTL, a rewrite with the same expiry to the millisecond, a DEL
-- without ZREM, an eviction). Such a change is announced when the lock is next a
-- candidate: when its score falls due (a vanished key is then Expired, not Released),
-- when a writer moves its score, or when a lockhub script touches the entity (catchup,
-- before it acts). Reads of locks still read the live keys and are right at once.
--
-- Out of step. The values hash and the seen set hold the same keys; when their sizes
-- differ (the first sweep after an upgrade, with no seen set yet; a program running
-- lockhub's scripts without KEYS[5]; a program keeping the values hash in step by
-- hand, README "The change feed as an interface"; one of the two expired first) the
-- sweep compares every member and every copy, as before the seen set, and brings the
-- seen set back in step. A lock whose copy equals its key is announced by nobody then:
-- the first sweep after an upgrade announces only what the old sweep would have.
--
-- KEYS[1]  index key    lockidx:{tenant}:type
-- KEYS[2]  values key   lockval:{tenant}:type
-- KEYS[3]  sweep mark   locksweep:{tenant}:type  (set while a sweep is recent)
-- KEYS[4]  feed key     lockfeed:{tenant}  (hash: command, channel; how another program
--          publishes on the tenant's change feed, kept while the sweeper sweeps the
--          tenant, that is while someone watches it)
-- KEYS[5]  seen key     lockseen:{tenant}:type  (sorted set: lock key -> the index
--          score lockhub last knew for it; see prelude.lua)
-- KEYS[6]  audit key    lockaudit:{tenant}  (stream; optional: see prelude.lua)
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
-- ARGV[13..17] the audit entry: at, cap, actor oid, actor name, reason (prelude.lua): the
--          sweep's entries have actor null, whatever ARGV[15..17] say
-- ARGV[18..23] the share block: tenant tag, lockable types, locks per person, locks per
--          tenant, changes a second, burst (prelude.lua); optional
--          (a sweep refuses nothing: it keeps the persons' indexes of what it finds)
-- ARGV[24] the audit's retention, ms (prelude.lua); optional
--
-- Returns {found, values, trimmed}:
--   found   the ops announced, one per event published
--   values  the values of the live locks, read with MGET in this same round trip;
--           empty when ARGV[10] is "0"
--   trimmed audit entries the cap dropped before their age (prelude.lua, auditDone)

auditing(13, 24)
sharing(18)
local read = ARGV[10] == '1'
if not read and tonumber(ARGV[11]) > 0 then
  if not redis.call('SET', KEYS[3], '1', 'NX', 'PX', ARGV[11]) then return {found, {}, auditDone()} end
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
local due = now + 1000 -- ended()'s second of clock skew
local flat = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')
local mirror = redis.call('ZRANGE', seen, 0, -1, 'WITHSCORES')
-- Both come sorted by score, then member, with scores formatted alike by Redis: equal
-- sets give equal lists. The values hash of the same size: nothing out of step.
local same = #flat == #mirror and redis.call('HLEN', KEYS[2]) * 2 == #mirror
if same then
  for i = 1, #flat do
    if flat[i] ~= mirror[i] then
      same = false
      break
    end
  end
end

local scores, members = {}, {}
local keys, listed = {}, {} -- the candidates: keys to read and compare with their copies
local function candidate(k)
  if not listed[k] then
    listed[k] = true
    keys[#keys + 1] = k
  end
end
local known = {} -- k -> its seen score; filled only when not the same
if same then
  -- nothing moved: only leases that may have run out; every member is ours (the seen
  -- set holds only lock keys of the type)
  local d = redis.call('ZRANGE', KEYS[1], '-inf', due, 'BYSCORE', 'WITHSCORES')
  for i = 1, #d, 2 do
    scores[d[i]] = d[i + 1]
    known[d[i]] = d[i + 1]
    candidate(d[i])
  end
  if read then
    for i = 1, #flat, 2 do members[#members + 1] = flat[i] end
  end
else
  for i = 1, #flat, 2 do
    local k = flat[i]
    if ours(k) then
      scores[k] = flat[i + 1]
      members[#members + 1] = k
    else
      redis.call('ZREM', KEYS[1], k) -- never read: on a cluster it may be in another slot
    end
  end
  for i = 1, #mirror, 2 do known[mirror[i]] = mirror[i + 1] end
  local full = redis.call('HLEN', KEYS[2]) * 2 ~= #mirror
  for _, k in ipairs(members) do
    local s, was = scores[k], known[k]
    if full or s ~= was or tonumber(s) <= due then candidate(k) end
  end
  -- seen keys whose member is gone: a program released the lock (ZREM, DEL), or the
  -- index ran out with it (the .NET claim gives the index the bare lease)
  for k in pairs(known) do
    if scores[k] == nil then
      if ours(k) then candidate(k) else unsee(k) end
    end
  end
  if full then -- copies the seen set does not know
    for _, k in ipairs(redis.call('HKEYS', KEYS[2])) do
      if scores[k] == nil then
        if ours(k) then candidate(k) else redis.call('HDEL', KEYS[2], k) end
      end
    end
  end
end

-- chunked runs cmd (prefixed with key, if any) over list in chunks of 1000 (unpack is
-- bounded by Lua's C stack) and returns the replies as one table by position.
local function chunked(cmd, key, list)
  local out = {}
  for i = 1, #list, 1000 do
    local got
    if key then
      got = redis.call(cmd, key, unpack(list, i, math.min(i + 999, #list)))
    else
      got = redis.call(cmd, unpack(list, i, math.min(i + 999, #list)))
    end
    for j = 1, #got do out[i + j - 1] = got[j] end
  end
  return out
end

-- what the keys hold (false: absent), read once: a read needs every live member
-- anyway, a sweep only the candidates
local live = {}
local function load(list)
  local got = chunked('MGET', nil, list)
  for i, k in ipairs(list) do live[k] = got[i] end
end
if read then load(members) end
local unread = {}
for _, k in ipairs(keys) do
  if live[k] == nil then unread[#unread + 1] = k end
end
load(unread)

local copies = chunked('HMGET', KEYS[2], keys)
local wrote = false -- the seen set was written: give it its expiry below
for i, k in ipairs(keys) do
  local v, c = live[k], copies[i]
  if v then
    local lock = v == c or decode(v) ~= nil -- a copy was a lock when it was taken
    if lock and v ~= c then
      if c and decode(c) == nil then c = false end
      changed(k, v, c, KEYS[1], KEYS[2], scores[k] or 0)
      c = v
      wrote = true
    end
    local score = scores[k]
    if lock and score == nil then -- back into the index, scored by the key's TTL
      score = now + math.max(redis.call('PTTL', k), 0)
      redis.call('ZADD', KEYS[1], score, k)
    end
    if c then -- the copy stays: remember the score it was compared at
      if known[k] ~= score then
        see(k, score or 0)
        wrote = true
      end
    elseif known[k] then
      unsee(k)
    end
  elseif c and decode(c) ~= nil then
    gone(k, c, KEYS[1], KEYS[2])
  else
    redis.call('ZREM', KEYS[1], k)
    redis.call('HDEL', KEYS[2], k)
    unsee(k)
    local f = foreign(k)
    if f and scores[k] ~= nil then announceFound(ended(tonumber(scores[k])), k, f) end
  end
end
local values = {}
if read then -- the members in index order, then the live keys put back in it
  for _, k in ipairs(members) do
    if live[k] then values[#values + 1] = live[k] end
  end
  for _, k in ipairs(keys) do
    if scores[k] == nil and live[k] then values[#values + 1] = live[k] end
  end
end
if #found > 0 or wrote or redis.call('PTTL', KEYS[1]) < 0 then
  settle(KEYS[1], KEYS[2])
end
return {found, values, auditDone()}
