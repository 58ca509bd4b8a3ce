-- renew: extend the caller's lease, compare-and-set on the exact stored bytes.
--
-- Go read the stored value, checked the holder, and built the new value keeping
-- acquiredAtUtc; this script writes it only if nothing changed in between.
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
-- ARGV[8]  the value Go read (exact bytes)
-- ARGV[9]  the new lock value, JSON built by Go
-- ARGV[10] lease, ms
-- ARGV[11] expiry, Unix ms (the index score)
-- ARGV[12] TTL for the index and values keys, ms
-- ARGV[13] id of the renewing socket, or "" (HTTP)
-- ARGV[14..18] the audit entry: at, cap, actor oid, actor name, reason (prelude.lua): a renewal is
--          not audited, only the changes of other writers found first
-- ARGV[19..24] the share block: tenant tag, lockable types, locks per person, locks per
--          tenant, changes a second, burst (prelude.lua); optional
--          (a renewal is never refused: it only keeps the person's index)
-- ARGV[25] the audit's retention, ms (prelude.lua); optional
--
-- Returns {status, value, found, trimmed}, status one of (renewReply in scripts.go):
--   "renewed"  published Renewed; value = ARGV[9]
--   "lost"     gone (value nil) or someone else's (value = the stored value)
--   "raced"    still the caller's but changed since Go read it (another tab renewed);
--              value = the stored value; Go retries with it
auditing(14, 25)
sharing(19)
local v = redis.call('GET', KEYS[1])
catchup(KEYS[1], v, KEYS[2], KEYS[3])
if not v then return reply('lost', false) end
if not holds(v, ARGV[7]) then return reply('lost', v) end
if v ~= ARGV[8] then return reply('raced', v) end

store(KEYS[1], KEYS[2], KEYS[3], ARGV[9], ARGV[10], ARGV[11], ARGV[12])
own(ARGV[7], KEYS[1], ARGV[11])
attach(KEYS[4], ARGV[13], ARGV[10])
publish('Renewed', ARGV[9])
return reply('renewed', ARGV[9])
