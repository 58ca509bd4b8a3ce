-- releasemany: release many of the caller's locks of one type at once (PROTOCOL.md §12,
-- version 3), each as release.lua releases one: an entity the caller does not hold is
-- left alone; one that another socket of the caller still uses stays (that socket's
-- share dropped); every other is dropped, announced and audited on its own, and handed
-- to the next in line.
--
-- KEYS[1..6]  as claimmany.lua
-- ARGV[1..6]  the event to publish, the clock, the index margin: see prelude.lua
-- ARGV[7]  holder oid of the caller
-- ARGV[8]  id of the releasing socket, or "" (HTTP: dropped whoever uses it)
-- ARGV[9]  n, how many entities (1 to 100: Go checked)
-- ARGV[10] the lock key prefix lock:{tenant}:type:
-- ARGV[11..10+n] the uids
-- ARGV[a..a+4], a = 11+n  the audit entry (prelude.lua); reason release
-- ARGV[a+5..a+10] the share block (prelude.lua); optional
-- ARGV[a+11] the audit's retention, ms (prelude.lua); optional
-- ARGV[a+12..a+16] the line block (line.lua); optional
--
-- Returns {status, value, found, trimmed, handed, passed}, status one of (manyReply in
-- scripts.go):
--   "released"     value = how many of them the caller held (dropped, or kept by another
--                  of the caller's sockets)
--   "rateLimited"  the caller has fewer changes left than locks to drop; nothing
--                  written; value = ms until enough are
local n = tonumber(ARGV[9])
local a = 11 + n
auditing(a, a + 11)
sharing(a + 5)
lining(a + 12)
local oid = ARGV[7]

local drop, keep = {}, {}
for i = 1, n do
  local k = ARGV[10] .. ARGV[10 + i]
  local v = redis.call('GET', k)
  catchup(k, v, KEYS[2], KEYS[3])
  if v and holds(v, oid) then
    local conns = 'lockconn:' .. string.sub(k, 6)
    if ARGV[8] ~= '' and redis.call('SCARD', conns) - redis.call('SISMEMBER', conns, ARGV[8]) > 0 then
      keep[#keep + 1] = conns
    else
      drop[#drop + 1] = {k, v, conns}
    end
  end
end
local wait = 0
if #drop > 0 then wait = take(oid, #drop) end
if wait > 0 then return reply('rateLimited', tostring(wait)) end
for _, conns in ipairs(keep) do redis.call('SREM', conns, ARGV[8]) end
for _, d in ipairs(drop) do
  local k, v = d[1], d[2]
  disown(oid, k)
  redis.call('DEL', k, d[3])
  redis.call('ZREM', KEYS[2], k)
  redis.call('HDEL', KEYS[3], k)
  unsee(k)
  publish('Released', v)
  record('Released', k, v, why, actor)
  freed(k, KEYS[2], KEYS[3], oid, true)
end
if #drop > 0 then settle(KEYS[2], KEYS[3]) end
return reply('released', tostring(#drop + #keep))
