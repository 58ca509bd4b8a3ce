-- sweep: announce what changed in a type's locks since lockhub last looked (leases
-- that ran out, and every change another program made: PROTOCOL.md §8).
--
-- What it reads. Every writer that keeps PROTOCOL.md §1's layout moves a lock's index
-- score when it changes the lock (claim: ZADD; renew, takeover: a new score; release:
-- ZREM), so the seen set (KEYS[5], a sorted set: lock key -> the index score lockhub
-- last knew, kept in step with the values hash by every script, see prelude.lua) says
-- which locks may have changed without reading them. A call looks at windows of at
-- most ARGV[25] members (PROTOCOL.md §4: no command holds Redis for long, however big
-- the type): the members whose score is due (not later than now + 1 s: the lease may
-- have run out without any writer touching the index), a window of the index by rank
-- whose scores it looks up in the seen set, and a window of the seen set whose members
-- it looks up in the index. The windows move on at each call from a cursor (ARGV[26]);
-- the caller calls again at once while the reply says more, until they come round.
-- It reads a lock key and its copy only for a candidate: a due member, a member whose
-- score differs from its seen score or is not seen, or a seen key no longer in the
-- index. Each candidate goes through the full comparison (changed, gone, a foreign
-- expiry), as every member did before the seen set. At most a 32nd of ARGV[25]
-- candidates a call: with more, the cursor stays, and the next call finds the rest.
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
-- sweep compares every member of its window and a window of the copies (HSCAN), as
-- before the seen set, and brings the seen set back in step. A lock whose copy equals its key is announced by nobody then:
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
-- ARGV[10] "0" (where "1" asked for the live locks' values, when sweeps also listed)
-- ARGV[11] ms: skip when another sweep of the type ran within this long (so N
--          instances sweep a type about once per interval, not N times); "0" never skips
-- ARGV[12] ms: how long the feed key lives after the last sweep
-- ARGV[13..17] the audit entry: at, cap, actor oid, actor name, reason (prelude.lua): the
--          sweep's entries have actor null, whatever ARGV[15..17] say
-- ARGV[18..23] the share block: tenant tag, lockable types, locks per person, locks per
--          tenant, changes a second, burst (prelude.lua); optional
--          (a sweep refuses nothing: it keeps the persons' indexes of what it finds)
-- ARGV[24] the audit's retention, ms (prelude.lua); optional
-- ARGV[25] the width of a window, 32 times the most candidates one call compares
--          ("0" or none: the whole type in one call)
-- ARGV[26] the cursor key  locksweepat:{tenant}:type  (string "<index rank> <seen rank>
--          <HSCAN cursor>": where the next call's windows start, absent at the start; in
--          the tenant's slot)
--
-- ARGV[27..31] the line block: clock shift, now, now + lease, lease, presence margin
--          (line.lua); optional: with it a lock found gone goes to the next in line
--
-- Returns {found, {}, more, trimmed, handed, passed}:
--   found   the ops announced, one per event published
--   {}      (where the live locks' values were, when sweeps also listed)
--   more    1 when the windows have not come round yet or candidates were left: the
--           caller calls again at once, else 0
--   trimmed audit entries the cap dropped before their age (prelude.lua, auditDone)
--   handed, passed  the hand-offs made and the limits that passed someone over (line.lua)

auditing(13, 24)
sharing(18)
lining(27)
if tonumber(ARGV[11]) > 0 then
  if not redis.call('SET', KEYS[3], '1', 'NX', 'PX', ARGV[11]) then return {found, {}, 0, auditDone(), handed, passed} end
end
if ARGV[1] ~= '' then
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
local width = tonumber(ARGV[25] or '0') or 0
if width <= 0 then width = 1000000000 end -- no window: the whole type in one call

-- The windows of this call: from the cursor (index rank, seen rank, HSCAN cursor of the
-- values hash), kept in ARGV[26] from one call to the next.
local ri, rs, hc = string.match(redis.call('GET', ARGV[26]) or '', '^(%d+) (%d+) (%d+)$')
ri, rs, hc = tonumber(ri) or 0, tonumber(rs) or 0, hc or '0'
local full = redis.call('HLEN', KEYS[2]) ~= redis.call('ZCARD', seen) -- out of step

local keys, listed = {}, {} -- the candidates: keys to read and compare with their copies
local function candidate(k)
  if not listed[k] then
    listed[k] = true
    keys[#keys + 1] = k
  end
end

-- Leases that may have run out, whatever the windows: their Expired is due now. Those
-- whose score has passed are candidates like the windows'; those within the second of
-- skew still ahead (soon) only where a call has room left, below: a lock in its last
-- second changes nothing when compared, and a handful of them must not hold the
-- windows where they are (a truncated call keeps its cursor) until they expire.
local d = redis.call('ZRANGE', KEYS[1], '-inf', due, 'BYSCORE', 'LIMIT', 0, width, 'WITHSCORES')
local soon = {}
for i = 1, #d, 2 do
  local k = d[i]
  if ours(k) then
    if tonumber(d[i + 1]) <= now then candidate(k) else soon[#soon + 1] = k end
  end
end

-- A window of the index, and one of the seen set. When nothing moved, the two are the
-- same sets sorted the same way (scores formatted alike by Redis): windows at the same
-- rank are equal element by element, and hold no candidate.
local w = redis.call('ZRANGE', KEYS[1], ri, ri + width - 1, 'WITHSCORES')
local sw = redis.call('ZRANGE', seen, rs, rs + width - 1, 'WITHSCORES')
local aligned = not full and ri == rs and #w == #sw
if aligned then
  for i = 1, #w do
    if w[i] ~= sw[i] then
      aligned = false
      break
    end
  end
end
-- Else: members of the index's window whose score differs from their seen score.
local mine = {}
for i = 1, #w, 2 do
  if ours(w[i]) then
    mine[#mine + 1] = w[i]
  else
    redis.call('ZREM', KEYS[1], w[i]) -- never read: on a cluster it may be in another slot
  end
end
if #mine > 0 and not aligned then
  local was = redis.call('ZMSCORE', seen, unpack(mine))
  local j = 0
  for i = 1, #w, 2 do
    if ours(w[i]) then
      j = j + 1
      if full or was[j] ~= w[i + 1] then candidate(w[i]) end
    end
  end
end
local riNext = ri + width
if #w < 2 * width then riNext = 0 end

-- A window of the seen set: keys whose member is gone (a program released the lock,
-- ZREM and DEL, or the index ran out with it: the .NET claim gives it the bare lease).
local m = {}
for i = 1, #sw, 2 do m[#m + 1] = sw[i] end
if #m > 0 and not aligned then
  local is = redis.call('ZMSCORE', KEYS[1], unpack(m))
  for i, k in ipairs(m) do
    if not is[i] then
      if ours(k) then candidate(k) else unsee(k) end
    end
  end
end
local rsNext = rs + width
if #m < width then rsNext = 0 end

-- Out of step: a window of the copies the seen set does not know.
local hcNext = '0'
if full then
  local page = redis.call('HSCAN', KEYS[2], hc, 'COUNT', math.min(width, 1000))
  hcNext = page[1]
  local ks = {}
  for i = 1, #page[2], 2 do ks[#ks + 1] = page[2][i] end
  if #ks > 0 then
    local is = redis.call('ZMSCORE', KEYS[1], unpack(ks))
    for i, k in ipairs(ks) do
      if not is[i] then
        if ours(k) then candidate(k) else redis.call('HDEL', KEYS[2], k) end
      end
    end
  end
end
-- When the index and the seen set are as big as each other, the seen window follows the
-- index's rank: a round over the index's ranks covers every rank of the seen set too, and
-- windows at one rank hold the same members when nothing moved (aligned, above). Moving
-- each on by its own length, they drifted a window apart for good after a bulk write
-- (the seen set, smaller while it caught up, came round first), and no window was
-- aligned again: every quiet call read both windows' scores, half of a big type's sweep.
if not full and riNext ~= rsNext and redis.call('ZCARD', KEYS[1]) == redis.call('ZCARD', seen) then
  rsNext = riNext
end
local cursor = riNext .. ' ' .. rsNext .. ' ' .. hcNext

-- more: the windows have not come round to the start yet, or candidates were left.
-- Truncated, the cursor stays, so the same windows are looked at again next call.
local more = 0
if riNext ~= 0 or rsNext ~= 0 or hcNext ~= '0' then more = 1 end
local truncated = false
local most = math.max(1, math.floor(width / 32)) -- each announces, records, keeps and hands on: ~100 µs
if #keys > most then
  for i = #keys, most + 1, -1 do keys[i] = nil end
  more, truncated = 1, true
end
for _, k in ipairs(soon) do
  if #keys >= most then break end
  candidate(k)
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

-- what the candidates hold (false: absent), their index and seen scores (nil: none)
local live, scores, known = {}, {}, {}
for i, v in ipairs(chunked('MGET', nil, keys)) do live[keys[i]] = v end
for i, v in ipairs(chunked('ZMSCORE', KEYS[1], keys)) do scores[keys[i]] = v or nil end
for i, v in ipairs(chunked('ZMSCORE', seen, keys)) do known[keys[i]] = v or nil end

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
    -- Back into the index, or a score that has passed while the key lives on (a writer
    -- whose clock is behind ours, a PEXPIRE that left the index as it was): scored by
    -- the key's TTL, so that it is not due, and a candidate, at every call until it ends.
    if lock and (score == nil or tonumber(score) <= now) then
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
    if freed(k, KEYS[1], KEYS[2], decode(c)['holderOid']) then wrote = true end
  else
    redis.call('ZREM', KEYS[1], k)
    redis.call('HDEL', KEYS[2], k)
    unsee(k)
    local f = foreign(k)
    if f and scores[k] ~= nil then
      announceFound(ended(tonumber(scores[k])), k, f)
      if freed(k, KEYS[1], KEYS[2], nil) then wrote = true end
    end
  end
end
if #found > 0 or wrote or redis.call('PTTL', KEYS[1]) < 0 then
  settle(KEYS[1], KEYS[2])
end
if truncated then -- the same windows again next call
elseif cursor == '0 0 0' then
  redis.call('DEL', ARGV[26]) -- come round: the next call starts at the start anyway
else
  redis.call('SET', ARGV[26], cursor, 'PX', 600000)
end
return {found, {}, more, auditDone(), handed, passed}
