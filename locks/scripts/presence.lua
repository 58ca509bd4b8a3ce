-- presence: who views an entity (PROTOCOL.md §9). Not prepended with prelude.lua: it
-- touches no lock. One script for every change of an entity's viewers, so that each
-- change is compared with what was announced last and announced once, in order.
--
-- KEYS[1]  views key    lockview:{tenant}:type:uid    sorted set: socket id -> expiry (Unix ms)
-- KEYS[2]  viewers key  lockviewer:{tenant}:type:uid  hash: socket id -> "<oid>\t<since ms>\t<viewer JSON>",
--                       field "viewers" -> the viewers JSON last announced, and
--                       field "version" -> its version
-- ARGV[1]  "PUBLISH", "SPUBLISH" (a cluster: the channel is in the tenant's slot) or ""
-- ARGV[2]  the tenant's channel of the change feed
-- ARGV[3]  message head: "<tenant>\n{\"type\":\"presence\",\"entityType\":..,\"entityUid\":..,\"viewers\":"
-- ARGV[4]  a shift of the server's clock, ms: 0 but in tests. Now is the server's TIME
--          (shifted), so that views from every instance run out by one clock, however
--          far the instances' own clocks drift apart; entries that expire by now are
--          dropped first
-- ARGV[5]  margin, ms: both keys outlive their latest entry by this much
-- ARGV[6]  what to do:
--   "view"     ARGV[7] socket id, ARGV[8] its time to live (ms from now), ARGV[9] oid,
--              ARGV[10] since (Unix ms), ARGV[11] the viewer's JSON {"oid","name","since"}:
--              add the socket's view, or refresh it (a view already there keeps its entry)
--   "unview"   ARGV[7..] socket ids: drop their views at once
--   "leave"    ARGV[7] when (ms from now), ARGV[8..] socket ids: their views end then, or
--              at their own time if sooner (a closing instance's sockets, whose
--              clients may view again elsewhere)
--   "refresh"  ARGV[7] time to live (ms from now), ARGV[8..] socket ids: extend the views that are
--              there; the others are answered as missing (Redis lost them), for the
--              caller to view again
--
-- Returns {viewers JSON, missing socket ids, version}. The viewers are one per oid, the
-- earliest since of its sockets, ordered by since (then oid). A change of them is
-- published in the same step, as head .. viewers .. "}\n" .. version: the frame, then
-- on a line of its own the list's version, which grows with every change of the
-- entity's viewers (a receiver drops a list older than one it has).
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000) + tonumber(ARGV[4])
local missing = {}

-- Entries that ran out: a socket of an instance that died, or one that left.
local gone = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now)
if #gone > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
  redis.call('HDEL', KEYS[2], unpack(gone))
end

local op = ARGV[6]
if op == 'view' then
  redis.call('ZADD', KEYS[1], now + tonumber(ARGV[8]), ARGV[7])
  redis.call('HSETNX', KEYS[2], ARGV[7], ARGV[9] .. '\t' .. ARGV[10] .. '\t' .. ARGV[11])
elseif op == 'unview' then
  for i = 7, #ARGV do
    redis.call('ZREM', KEYS[1], ARGV[i])
    redis.call('HDEL', KEYS[2], ARGV[i])
  end
elseif op == 'leave' then
  for i = 8, #ARGV do
    redis.call('ZADD', KEYS[1], 'XX', 'LT', now + tonumber(ARGV[7]), ARGV[i])
  end
elseif op == 'refresh' then
  for i = 8, #ARGV do
    if redis.call('ZSCORE', KEYS[1], ARGV[i]) then
      redis.call('ZADD', KEYS[1], now + tonumber(ARGV[7]), ARGV[i])
    else
      missing[#missing + 1] = ARGV[i]
    end
  end
else
  return redis.error_reply('presence: unknown op ' .. tostring(op))
end

-- The people: one per oid, the earliest since, of the sockets whose view is there. An
-- entry without its view (one of the two keys evicted, or restored alone) is dropped.
local views = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES') -- by expiry: the last is the latest
local live = {}
for i = 1, #views, 2 do live[views[i]] = true end
local entries = redis.call('HGETALL', KEYS[2])
local first = {} -- oid -> {since, json, oid}
for i = 1, #entries, 2 do
  local field = entries[i]
  if field ~= 'viewers' and field ~= 'version' then
    local oid, since, json = string.match(entries[i + 1], '^([^\t]*)\t([^\t]*)\t(.*)$')
    if oid and live[field] then
      since = tonumber(since) or 0
      local f = first[oid]
      if f == nil or since < f[1] then first[oid] = {since, json, oid} end
    else
      redis.call('HDEL', KEYS[2], field)
    end
  end
end
local people = {}
for _, f in pairs(first) do people[#people + 1] = f end
table.sort(people, function(a, b)
  if a[1] ~= b[1] then return a[1] < b[1] end
  return a[3] < b[3]
end)
local parts = {}
for i, p in ipairs(people) do parts[i] = p[2] end
local viewers = '[' .. table.concat(parts, ',') .. ']'

-- Each announced list has a version, greater than every one before it for the entity:
-- the last plus one, or now in µs when that is more (the keys were gone), so that a
-- receiver can drop a list older than one it already has.
local last = redis.call('HGET', KEYS[2], 'viewers') or '[]'
local version = tonumber(redis.call('HGET', KEYS[2], 'version')) or 0
if viewers ~= last then version = math.max(version + 1, now * 1000) end
if #people == 0 then
  -- Views of sockets whose entry is gone go too: their hubs find them missing.
  redis.call('DEL', KEYS[1], KEYS[2])
else
  if viewers ~= last then
    redis.call('HSET', KEYS[2], 'viewers', viewers, 'version', string.format('%.0f', version))
  end
  local ttl = tonumber(views[#views]) - now + tonumber(ARGV[5])
  redis.call('PEXPIRE', KEYS[1], ttl)
  redis.call('PEXPIRE', KEYS[2], ttl)
end
if viewers ~= last and ARGV[1] ~= '' then
  redis.call(ARGV[1], ARGV[2], ARGV[3] .. viewers .. '}\n' .. string.format('%.0f', version))
end
return {viewers, missing, string.format('%.0f', version)}
