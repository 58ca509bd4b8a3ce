-- list: read one page of a type's live locks, and nothing else: it announces nothing
-- and changes nothing. Not prepended with prelude.lua. Lists (a watch's snapshot, list
-- by type, the console) read a type page by page, each page its own short script, so
-- that a type of any size never holds Redis for long (PROTOCOL.md §4, "Bounded work per
-- Redis command"): other tenants' commands are served between the pages. A lock that
-- expires between two pages is simply absent, as between a range and an MGET; one
-- renewed between them may be read twice (its score moved past the cursor), and the
-- caller keeps one read of each key. None is skipped: a cursor whose member moved
-- starts again at its score, ties included. Announcing what nobody announced is the
-- sweeper's (sweep.lua), which sweeps every watched type.
--
-- Pages follow the index in its order (score, then member, as Redis sorts ties) from a
-- cursor: the score and the member read last. When the index is gone (a program's
-- PEXPIRE of it may end it before some of its locks: sweep.lua puts such keys back),
-- the keys lockhub keeps a value copy of are read instead, page by page with HSCAN.
--
-- KEYS[1]  index key    lockidx:{tenant}:type
-- KEYS[2]  values key   lockval:{tenant}:type
-- ARGV[1]  the lock key prefix of the index's type: lock:{tenant}:type:
-- ARGV[2]  how many members a page reads at most
-- ARGV[3]  where to start: "i <score> <member>" after that member of the index ("i"
--          alone: from the start), or "h <cursor>" in the values hash (HSCAN's cursor)
--
-- Returns {keys, values, next}: the page's lock keys, what each holds (false for a key
-- that expired in between), and the cursor of the next page, or "" after the last.
local prefix = ARGV[1]
local count = tonumber(ARGV[2])
local function ours(k)
  return string.sub(k, 1, #prefix) == prefix
end

local members, next = {}, ''
local where, rest = string.match(ARGV[3], '^(%a) ?(.*)$')
if where == 'i' and redis.call('EXISTS', KEYS[1]) == 0 then where, rest = 'h', '0' end
if where == 'i' then
  -- From the cursor's member, by rank, when it is still where it was read; else from
  -- its score, ties included (read again, never skipped).
  local score, after = string.match(rest, '^(%S+) (.*)$')
  local got
  local at = score and redis.call('ZSCORE', KEYS[1], after)
  if at and tonumber(at) == tonumber(score) then
    local from = redis.call('ZRANK', KEYS[1], after) + 1
    got = redis.call('ZRANGE', KEYS[1], from, from + count - 1, 'WITHSCORES')
  else
    got = redis.call('ZRANGE', KEYS[1], score or '-inf', '+inf', 'BYSCORE', 'LIMIT', 0, count, 'WITHSCORES')
  end
  for i = 1, #got, 2 do
    if ours(got[i]) then members[#members + 1] = got[i] end
  end
  if #got == 2 * count then next = 'i ' .. got[#got] .. ' ' .. got[#got - 1] end
else
  local page = redis.call('HSCAN', KEYS[2], rest, 'COUNT', count)
  for i = 1, #page[2], 2 do
    if ours(page[2][i]) then members[#members + 1] = page[2][i] end
  end
  if page[1] ~= '0' then next = 'h ' .. page[1] end
end

local values = {}
if #members > 0 then values = redis.call('MGET', unpack(members)) end
return {members, values, next}
