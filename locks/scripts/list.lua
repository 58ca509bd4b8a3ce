-- list: read a type's live locks for a snapshot, and nothing else: it announces
-- nothing and changes nothing. Not prepended with prelude.lua. A snapshot is read only
-- for a watched type, and every watched type is swept by the sweeper (sweep.lua, each
-- --sweep-interval), which announces what nobody announced and keeps the index in step;
-- the watchers of a type hear of those changes from it (PROTOCOL.md §8: within 2 s).
-- Reading without the sweep's comparisons costs Redis less (BenchmarkSweep: 0.64 of
-- List's Redis time at 10 locks), and a reconnect crowd reads one type thousands of
-- times.
--
-- What it reads: every member of the index that is a lock key of the type, then the
-- keys lockhub keeps a value copy of that are not in the index (a program's PEXPIRE
-- of the index may end it before some of its locks: sweep.lua puts such keys back),
-- with one MGET, all in the tenant's slot. A key that expired in between is absent.
--
-- KEYS[1]  index key    lockidx:{tenant}:type
-- KEYS[2]  values key   lockval:{tenant}:type
-- ARGV[1]  the lock key prefix of the index's type: lock:{tenant}:type:
--
-- Returns the values of the live locks, in index order, then the others.
local prefix = ARGV[1]
local function ours(k)
  return string.sub(k, 1, #prefix) == prefix
end
local members, indexed = {}, {}
for _, k in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  if ours(k) then
    members[#members + 1] = k
    indexed[k] = true
  end
end
for _, k in ipairs(redis.call('HKEYS', KEYS[2])) do
  if not indexed[k] and ours(k) then members[#members + 1] = k end
end
local values = {}
for i = 1, #members, 1000 do -- unpack is bounded by Lua's C stack
  local got = redis.call('MGET', unpack(members, i, math.min(i + 999, #members)))
  for j = 1, #got do
    if got[j] then values[#values + 1] = got[j] end
  end
end
return values
