-- claim: take a free lock, or report who holds it.
--
-- KEYS[1]  lock key     lock:{tenant}:type:uid
-- KEYS[2]  index key    lockidx:{tenant}:type   (sorted set: lock key -> expiry, Unix ms)
-- KEYS[3]  values key   lockval:{tenant}:type   (hash: lock key -> value last stored)
-- KEYS[4]  sockets key  lockconn:{tenant}:type:uid (set: ids of the sockets that claimed it)
-- ARGV[1..4]  the event to publish: see prelude.lua
-- ARGV[5]  holder oid of the caller
-- ARGV[6]  the new lock value, JSON built by Go
-- ARGV[7]  lease, ms (the key's PX)
-- ARGV[8]  expiry, Unix ms (the index score)
-- ARGV[9]  TTL for the index and values keys, ms (lease plus a margin)
-- ARGV[10] id of the claiming socket, or "" (HTTP)
--
-- Returns {status, value}, status one of (claimReply in scripts.go):
--   "acquired"  it was free and is now the caller's, published Acquired; value = ARGV[6]
--   "mine"      the caller already holds it (another tab); value = the stored value
--               (Go renews it by compare-and-set, keeping acquiredAtUtc)
--   "locked"    someone else holds it; value = the stored value
if redis.call('SET', KEYS[1], ARGV[6], 'NX', 'PX', ARGV[7]) then
  redis.call('ZADD', KEYS[2], ARGV[8], KEYS[1])
  redis.call('HSET', KEYS[3], KEYS[1], ARGV[6])
  extend(KEYS[2], ARGV[9])
  extend(KEYS[3], ARGV[9])
  redis.call('DEL', KEYS[4]) -- sockets of a lease that ran out
  attach(KEYS[4], ARGV[10], ARGV[7])
  publish('Acquired', ARGV[6])
  return {'acquired', ARGV[6]}
end

local v = redis.call('GET', KEYS[1])
if holds(v, ARGV[5]) then return {'mine', v} end
return {'locked', v}
