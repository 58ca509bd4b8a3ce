-- now: the clock of the Redis server that holds KEYS[1], in Unix ms. Liveness records
-- are scored and judged by it (locks/instances.go), so that every instance reads the
-- same clock, however far the instances' own clocks drift apart. Not prepended with
-- prelude.lua: it reads and writes nothing.
--
-- KEYS[1]  lockhub:instances (only to be run where it lives)
--
-- Returns the server's time, Unix ms.
local t = redis.call('TIME')
return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
