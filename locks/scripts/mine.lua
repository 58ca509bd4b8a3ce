-- mine: the live locks of one person, from the person's index (prelude.lua, "Fair
-- share"): its cost grows with the person's own locks, never with the tenant's.
--
-- KEYS[1]  person key   lockmine:{tenant}:<oid>  (sorted set: lock key -> expiry, Unix ms)
-- ARGV[1]  now, Unix ms
-- ARGV[2]  how many locks to read at most (a person's quota, and then some)
--
-- Returns the stored values of the person's live lock keys, in order of expiry (false
-- for a key gone since, or a value that is not a lock: the caller skips it, and checks
-- the holder, since another program may have given the lock to someone else).
local keys = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. ARGV[1], '+inf', 'LIMIT', 0, tonumber(ARGV[2]))
if #keys == 0 then return {} end
return redis.call('MGET', unpack(keys))
