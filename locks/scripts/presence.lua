-- presence: who views an entity (PROTOCOL.md §9). Not prepended with prelude.lua: it
-- changes no lock; people.lua, prepended, works out the viewers. One script for every
-- change of an entity's viewers, so that each change is compared with what was
-- announced last and announced once, in order (a lock that changes hands announces
-- them too, from its own script: people.lua).
--
-- KEYS[1]  views key    lockview:{tenant}:type:uid    sorted set: socket id -> expiry (Unix ms)
-- KEYS[2]  viewers key  lockviewer:{tenant}:type:uid  hash: socket id -> "<oid>\t<since ms>\t<viewer JSON>",
--                       field "viewers" -> the viewers JSON last announced, and
--                       field "version" -> its version
-- KEYS[3]  line key     lockline:{tenant}:type:uid    hash: socket id -> "<waiting since ms>\t<oid>\t<lock head>"
--                       (version 3; optional: without it no intent is kept)
-- KEYS[4]  lock key     lock:{tenant}:type:uid        read only: who holds it (optional)
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
--              ARGV[10] since (Unix ms), ARGV[11] the viewer's JSON {"oid","name","since"},
--              ARGV[12] the intent, "edit" or "look" (none: look), ARGV[13] the lock head
--              of a hand-off to this person (people.lua): add the socket's view, or
--              refresh it (a view already there keeps its entry); with intent edit the
--              socket joins the line now unless it is in it already, with look it leaves it
--   "unview"   ARGV[7..] socket ids: drop their views at once
--   "leave"    ARGV[7] when (ms from now), ARGV[8..] socket ids: their views end then, or
--              at their own time if sooner (a closing instance's sockets, whose
--              clients may view again elsewhere)
--   "refresh"  ARGV[7] time to live (ms from now), ARGV[8..] socket ids: extend the views that are
--              there; the others are answered as missing (Redis lost them), for the
--              caller to view again
--
-- Returns {viewers JSON, missing socket ids, version, expired socket ids}. The viewers
-- are one per oid, the earliest since of its sockets, ordered by since (then oid), each
-- with its state and, when waiting, its position (people.lua). The expired sockets are
-- those whose view this call found run out: a lock handed to one of them is released
-- by the caller (handed.lua). A change of them is
-- published in the same step, as head .. viewers .. "}\n" .. version: the frame, then
-- on a line of its own the list's version, which grows with every change of the
-- entity's viewers (a receiver drops a list older than one it has).
local now = serverNow(ARGV[4])
local missing = {}

-- Entries that ran out: a socket of an instance that died, or one that left.
local gone = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now)
if #gone > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
  redis.call('HDEL', KEYS[2], unpack(gone))
  if KEYS[3] then redis.call('HDEL', KEYS[3], unpack(gone)) end
end

local op = ARGV[6]
if op == 'view' then
  redis.call('ZADD', KEYS[1], now + tonumber(ARGV[8]), ARGV[7])
  redis.call('HSETNX', KEYS[2], ARGV[7], ARGV[9] .. '\t' .. ARGV[10] .. '\t' .. ARGV[11])
  if KEYS[3] then
    if ARGV[12] == 'edit' then
      redis.call('HSETNX', KEYS[3], ARGV[7], string.format('%.0f', now) .. '\t' .. ARGV[9] .. '\t' .. (ARGV[13] or ''))
    else
      redis.call('HDEL', KEYS[3], ARGV[7])
    end
  end
elseif op == 'unview' then
  for i = 7, #ARGV do
    redis.call('ZREM', KEYS[1], ARGV[i])
    redis.call('HDEL', KEYS[2], ARGV[i])
    if KEYS[3] then redis.call('HDEL', KEYS[3], ARGV[i]) end
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

local holder = nil
if KEYS[4] then holder = holderOf(redis.call('GET', KEYS[4])) end
local viewers, version = people(KEYS[1], KEYS[2], KEYS[3], holder, now, ARGV[5], ARGV[1], ARGV[2], ARGV[3])
return {viewers, missing, version, gone}
