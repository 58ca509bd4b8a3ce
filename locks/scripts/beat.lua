-- beat: refreshes an instance's liveness record, scored by the clock of the Redis
-- server that holds it (as now.lua reads it), in the heartbeat's one round trip. Not
-- prepended with prelude.lua: it touches no lock. Its one key is not a tenant's.
--
-- KEYS[1]  lockhub:instances  sorted set: instance id -> last heartbeat (Unix ms)
-- ARGV[1]  the instance id
-- ARGV[2]  how long the set outlives this heartbeat, ms
-- ARGV[3]  a shift of the server's clock, ms: 0 but in tests
--
-- Returns 0 when refreshed, 1 when the record was missing (added), 2 when every
-- instance's record was missing, the set itself gone: Redis lost its data (a restart or
-- a failover without persistence), or no instance ran before this one.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + tonumber(ARGV[3])
local existed = redis.call('EXISTS', KEYS[1])
local added = redis.call('ZADD', KEYS[1], now, ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
if added == 1 and existed == 0 then return 2 end
return added
