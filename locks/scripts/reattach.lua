-- reattach: a socket of an instance that was taken for dead while it lived (cut off
-- from Redis longer than the instance timeout) counts again for the two-tab rule. The
-- reaper dropped its id from the lock's sockets where another socket was left
-- (forget.lua); this puts it back, while the lock is still its holder's. Not prepended
-- with prelude.lua: it changes neither the lock nor the index, and publishes nothing.
--
-- KEYS[1]  lock key     lock:{tenant}:type:uid
-- KEYS[2]  sockets key  lockconn:{tenant}:type:uid
-- ARGV[1]  holder oid of the socket's user
-- ARGV[2]  id of the socket
--
-- Returns 1 when the id was put back, 0 when it was there already or the lock is gone
-- or someone else's (the socket's next renew answers lost).
local v = redis.call('GET', KEYS[1])
if not v then return 0 end
local ok, d = pcall(cjson.decode, v)
if not ok or type(d) ~= 'table' or d['holderOid'] ~= ARGV[1] then return 0 end
if redis.call('SADD', KEYS[2], ARGV[2]) == 0 then return 0 end
local ttl = redis.call('PTTL', KEYS[1])
if ttl > 0 then redis.call('PEXPIRE', KEYS[2], ttl) end -- the sockets live as long as the lease
return 1
