-- renew: extend the caller's lease, compare-and-set on the exact stored bytes.
--
-- Go read the stored value, checked the holder, and built the new value keeping
-- acquiredAtUtc; this script writes it only if nothing changed in between.
--
-- KEYS[1]  lock key     lock:{tenant}:type:uid
-- KEYS[2]  index key    lockidx:{tenant}:type
-- KEYS[3]  values key   lockval:{tenant}:type
-- KEYS[4]  sockets key  lockconn:{tenant}:type:uid
-- ARGV[1..4]  the event to publish: see prelude.lua
-- ARGV[5]  holder oid of the caller
-- ARGV[6]  the value Go read (exact bytes)
-- ARGV[7]  the new lock value, JSON built by Go
-- ARGV[8]  lease, ms
-- ARGV[9]  expiry, Unix ms (the index score)
-- ARGV[10] TTL for the index and values keys, ms
-- ARGV[11] id of the renewing socket, or "" (HTTP)
--
-- Returns {status, value}, status one of (renewReply in scripts.go):
--   "renewed"  published Renewed; value = ARGV[7]
--   "lost"     gone (value nil) or someone else's (value = the stored value)
--   "raced"    still the caller's but changed since Go read it (another tab renewed);
--              value = the stored value; Go retries with it
local v = redis.call('GET', KEYS[1])
if not v then return {'lost', false} end
if not holds(v, ARGV[5]) then return {'lost', v} end
if v ~= ARGV[6] then return {'raced', v} end

redis.call('SET', KEYS[1], ARGV[7], 'PX', ARGV[8])
redis.call('ZADD', KEYS[2], ARGV[9], KEYS[1])
redis.call('HSET', KEYS[3], KEYS[1], ARGV[7])
extend(KEYS[2], ARGV[10])
extend(KEYS[3], ARGV[10])
attach(KEYS[4], ARGV[11], ARGV[8])
publish('Renewed', ARGV[7])
return {'renewed', ARGV[7]}
