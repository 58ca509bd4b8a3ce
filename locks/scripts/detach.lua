-- detach: a socket that claimed a lock is gone; release the lock if no other socket of
-- its holder uses it.
--
-- Each socket that claims, renews or takes over a lock adds its connection id to the
-- lock's sockets set; this removes one. When release is asked and the set is then
-- empty, the lock is released as release.lua would. The same person in two tabs is one
-- holder with two sockets: closing one tab leaves the other's id, so the lock stays.
--
-- KEYS[1]  lock key     lock:{tenant}:type:uid
-- KEYS[2]  index key    lockidx:{tenant}:type
-- KEYS[3]  values key   lockval:{tenant}:type
-- KEYS[4]  sockets key  lockconn:{tenant}:type:uid
-- ARGV[1]  holder oid of the socket's user
-- ARGV[2]  connection id of the socket that is gone
-- ARGV[3]  "1" to release when no socket is left, "0" to only forget the socket
--          (a graceful shutdown: its clients reconnect elsewhere and claim again)
--
-- Returns {status, value, rev}:
--   status 1  released; value = the value that was stored
--   status 0  kept: another socket uses it, it is gone, or it is someone else's
--   rev       the server's TIME in microseconds, a string
local t = redis.call('TIME')
local rev = t[1] .. string.format('%06d', tonumber(t[2]))

redis.call('SREM', KEYS[4], ARGV[2])
if ARGV[3] ~= '1' or redis.call('SCARD', KEYS[4]) > 0 then return {0, false, rev} end

local v = redis.call('GET', KEYS[1])
if not v then return {0, false, rev} end
local ok, d = pcall(cjson.decode, v)
if not (ok and type(d) == 'table' and d['holderOid'] == ARGV[1]) then
  return {0, v, rev}
end
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], KEYS[1])
redis.call('HDEL', KEYS[3], KEYS[1])
return {1, v, rev}
