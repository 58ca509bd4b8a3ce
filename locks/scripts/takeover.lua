-- takeover: replace whoever holds the lock with the caller (the caller's role was
-- checked in Go).
--
-- KEYS[1]  lock key     lock:{tenant}:type:uid
-- KEYS[2]  index key    lockidx:{tenant}:type
-- KEYS[3]  values key   lockval:{tenant}:type
-- KEYS[4]  sockets key  lockconn:{tenant}:type:uid
-- KEYS[5]  seen key     lockseen:{tenant}:type  (sorted set: lock key -> its index score last known;
--          optional: see prelude.lua)
-- KEYS[6]  audit key    lockaudit:{tenant}  (stream; optional: see prelude.lua)
-- ARGV[1..6]  the event to publish, the clock, the index margin: see prelude.lua
-- ARGV[7]  holder oid of the caller
-- ARGV[8]  the new lock value, JSON built by Go
-- ARGV[9]  lease, ms
-- ARGV[10] expiry, Unix ms (the index score)
-- ARGV[11] TTL for the index and values keys, ms
-- ARGV[12] id of the socket taking over, or "" (HTTP)
-- ARGV[13..17] the audit entry: at, cap, actor oid, actor name, reason (prelude.lua); the
--          Acquired or TakenOver entry's reason is takeover, its holder the caller
--          (a TakenOver's previous: whose lock it was)
-- ARGV[18..23] the share block: tenant tag, lockable types, locks per person, locks per
--          tenant, changes a second, burst (prelude.lua); optional
-- ARGV[24] the audit's retention, ms (prelude.lua); optional
-- ARGV[25..29] the line block: clock shift, now, now + lease, lease, presence margin
--          (line.lua); optional: the viewers are announced when the takeover changes them
--
-- Returns {status, value, found, trimmed}, status one of (takeoverReply in scripts.go):
--   "takenOver"  someone else held it and now the caller does, published TakenOver;
--                value = the previous value
--   "acquired"   it was free and is now the caller's, published Acquired; value nil
--   "mine"       the caller already holds it; value = the stored value (Go renews it
--                by compare-and-set, keeping acquiredAtUtc)
--   "tooMany"    the caller (or, for a free lock, the tenant) holds as many locks as the
--                share allows; nothing written; value = the setting
--   "rateLimited"  the caller made as many changes as the share allows; nothing
--                written; value = ms until the next is allowed
auditing(13, 24)
sharing(18)
lining(25)
local v = redis.call('GET', KEYS[1])
catchup(KEYS[1], v, KEYS[2], KEYS[3])
local prev = nil
if v then
  prev = decode(v)
  if prev ~= nil and prev['holderOid'] == ARGV[7] then return reply('mine', v) end
end
local limit = over(ARGV[7], not v)
if limit then return reply('tooMany', limit) end
local wait = take(ARGV[7], 1)
if wait > 0 then return reply('rateLimited', tostring(wait)) end
store(KEYS[1], KEYS[2], KEYS[3], ARGV[8], ARGV[9], ARGV[10], ARGV[11])
if prev ~= nil then disown(prev['holderOid'], KEYS[1]) end
own(ARGV[7], KEYS[1], ARGV[10])
redis.call('DEL', KEYS[4]) -- the previous holder's sockets no longer hold it
attach(KEYS[4], ARGV[12], ARGV[9])
announcePeople(KEYS[1], ARGV[7])
if not v then
  publish('Acquired', ARGV[8])
  record('Acquired', KEYS[1], ARGV[8], why, actor)
  return reply('acquired', false)
end
publish('TakenOver', ARGV[8], previous(prev))
record('TakenOver', KEYS[1], ARGV[8], why, actor, whose(prev))
return reply('takenOver', v)
