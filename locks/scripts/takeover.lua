-- takeover: replace whoever holds the lock with the caller (the caller's role was
-- checked in Go).
--
-- KEYS[1]  lock key     lock:{tenant}:type:uid
-- KEYS[2]  index key    lockidx:{tenant}:type
-- KEYS[3]  values key   lockval:{tenant}:type
-- KEYS[4]  sockets key  lockconn:{tenant}:type:uid
-- ARGV[1..4]  the event to publish: see prelude.lua
-- ARGV[5]  holder oid of the caller
-- ARGV[6]  the new lock value, JSON built by Go
-- ARGV[7]  lease, ms
-- ARGV[8]  expiry, Unix ms (the index score)
-- ARGV[9]  TTL for the index and values keys, ms
-- ARGV[10] id of the socket taking over, or "" (HTTP)
--
-- Returns {status, value}, status one of (takeoverReply in scripts.go):
--   "takenOver"  someone else held it and now the caller does, published TakenOver;
--                value = the previous value
--   "acquired"   it was free and is now the caller's, published Acquired; value nil
--   "mine"       the caller already holds it; value = the stored value (Go renews it
--                by compare-and-set, keeping acquiredAtUtc)
local v = redis.call('GET', KEYS[1])
local prev = nil
if v then
  prev = decode(v)
  if prev ~= nil and prev['holderOid'] == ARGV[5] then return {'mine', v} end
end
redis.call('SET', KEYS[1], ARGV[6], 'PX', ARGV[7])
redis.call('ZADD', KEYS[2], ARGV[8], KEYS[1])
redis.call('HSET', KEYS[3], KEYS[1], ARGV[6])
extend(KEYS[2], ARGV[9])
extend(KEYS[3], ARGV[9])
redis.call('DEL', KEYS[4]) -- the previous holder's sockets no longer hold it
attach(KEYS[4], ARGV[10], ARGV[7])
if not v then
  publish('Acquired', ARGV[6])
  return {'acquired', false}
end
-- previousHolder: two JSON strings encoded by cjson, not a re-encoded lock value
local oid, name = '', ''
if prev ~= nil then
  if type(prev['holderOid']) == 'string' then oid = prev['holderOid'] end
  if type(prev['holderName']) == 'string' then name = prev['holderName'] end
end
publish('TakenOver', ARGV[6], ',"previousHolder":{"oid":' .. cjson.encode(oid) .. ',"name":' .. cjson.encode(name) .. '}')
return {'takenOver', v}
