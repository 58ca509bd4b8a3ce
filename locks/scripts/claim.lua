-- claim: take a free lock, or report who holds it.
--
-- KEYS[1]  lock key     lock:{tenant}:type:uid
-- KEYS[2]  index key    lockidx:{tenant}:type   (sorted set: lock key -> expiry, Unix ms)
-- KEYS[3]  values key   lockval:{tenant}:type   (hash: lock key -> value last announced)
-- KEYS[4]  sockets key  lockconn:{tenant}:type:uid (set: ids of the sockets that claimed it)
-- KEYS[5]  seen key     lockseen:{tenant}:type  (sorted set: lock key -> its index score last known;
--          optional: see prelude.lua)
-- KEYS[6]  audit key    lockaudit:{tenant}  (stream; optional: see prelude.lua)
-- ARGV[1..6]  the event to publish, the clock, the index margin: see prelude.lua
-- ARGV[7]  holder oid of the caller
-- ARGV[8]  the new lock value, JSON built by Go
-- ARGV[9]  lease, ms (the key's PX)
-- ARGV[10] expiry, Unix ms (the index score)
-- ARGV[11] TTL for the index and values keys, ms (lease plus the margin)
-- ARGV[12] id of the claiming socket, or "" (HTTP)
-- ARGV[13..17] the audit entry: at, cap, actor oid, actor name, reason (prelude.lua); the
--          Acquired entry's reason is claim
-- ARGV[18..23] the share block: tenant tag, lockable types, locks per person, locks per
--          tenant, changes a second, burst (prelude.lua); optional
-- ARGV[24] the audit's retention, ms (prelude.lua); optional
-- ARGV[25..29] the line block: clock shift, now, now + lease, lease, presence margin
--          (line.lua); optional: the viewers are announced when the claim changes them
--
-- Returns {status, value, found, trimmed}, status one of (claimReply in scripts.go):
--   "acquired"  it was free and is now the caller's, published Acquired; value = ARGV[8]
--               (free with people waiting, it goes to the first of them first: line.lua,
--               and the claim answers mine or locked as for a held lock)
--   "mine"      the caller already holds it (another tab); value = the stored value
--               (Go renews it by compare-and-set, keeping acquiredAtUtc)
--   "locked"    someone else holds it; value = the stored value
--   "tooMany"   it was free, but the caller or the tenant holds as many locks as the
--               share allows; nothing written; value = the setting (max-locks-per-...)
--   "rateLimited"  it was free, but the caller made as many changes as the share
--               allows; nothing written; value = ms until the next is allowed
auditing(13, 24)
sharing(18)
lining(25)
local v = redis.call('GET', KEYS[1])
catchup(KEYS[1], v, KEYS[2], KEYS[3])
-- Free while someone waits (a lease that ran out or another program's release, found
-- here before any sweep): it goes to the line first (PROTOCOL.md §11), then the claim
-- meets it as it would any held lock.
if not v and handoff(KEYS[1], KEYS[2], KEYS[3], nil) then
  v = redis.call('GET', KEYS[1])
  announcePeople(KEYS[1], holderOf(v))
end
if v then
  if holds(v, ARGV[7]) then return reply('mine', v) end
  return reply('locked', v)
end
local limit = over(ARGV[7], true)
if limit then return reply('tooMany', limit) end
local wait = take(ARGV[7], 1)
if wait > 0 then return reply('rateLimited', tostring(wait)) end
store(KEYS[1], KEYS[2], KEYS[3], ARGV[8], ARGV[9], ARGV[10], ARGV[11])
own(ARGV[7], KEYS[1], ARGV[10])
redis.call('DEL', KEYS[4]) -- sockets of a lease that ran out
attach(KEYS[4], ARGV[12], ARGV[9])
publish('Acquired', ARGV[8])
record('Acquired', KEYS[1], ARGV[8], why, actor)
announcePeople(KEYS[1], ARGV[7])
return reply('acquired', ARGV[8])
