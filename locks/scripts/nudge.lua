-- nudge: a viewer asks the holder of a lock to finish (PROTOCOL.md §9). Not prepended
-- with prelude.lua: it changes no lock.
--
-- KEYS[1]  lock key    lock:{tenant}:type:uid
-- KEYS[2]  nudge key   locknudge:{tenant}:type:uid:<oid of the caller>, set for the rate
-- ARGV[1]  "PUBLISH", "SPUBLISH" (a cluster: the channel is in the tenant's slot) or ""
-- ARGV[2]  the tenant's channel of the change feed
-- ARGV[3]  message head: "<tenant>\n{\"type\":\"nudge\",\"entityType\":..,\"entityUid\":..,
--          \"from\":{..},\"at\":..,\"to\":" (the holder's oid and "}" follow)
-- ARGV[4]  oid of the caller
-- ARGV[5]  how long one nudge of the caller's bars the next, ms
--
-- Returns {status, wait}, status one of:
--   "nudged"       published for the holder's sockets
--   "notHeld"      nobody holds the lock, or the caller does: nobody to ask
--   "rateLimited"  the caller nudged this entity's holder less than ARGV[5] ago; wait is
--                  how long until the next may go, ms
local v = redis.call('GET', KEYS[1])
local ok, d = false, nil
if v then ok, d = pcall(cjson.decode, v) end
if not ok or type(d) ~= 'table' or type(d['holderOid']) ~= 'string' or d['holderOid'] == ARGV[4] then
  return {'notHeld', 0}
end
if not redis.call('SET', KEYS[2], '1', 'NX', 'PX', tonumber(ARGV[5])) then
  return {'rateLimited', redis.call('PTTL', KEYS[2])}
end
if ARGV[1] ~= '' then
  redis.call(ARGV[1], ARGV[2], ARGV[3] .. cjson.encode(d['holderOid']) .. '}')
end
return {'nudged', 0}
