-- reaped: takes a reaped instance whose holdings are due for detaching, for a while, so
-- that one instance at a time detaches them. Not prepended with prelude.lua: it
-- changes no lock. Its one key is not a tenant's (locks/instances.go).
--
-- KEYS[1]  lockhub:reaped   sorted set: instance id -> when its holdings may be
--                           detached (Unix ms): the end of the release grace, or of
--                           the last taker's turn
-- ARGV[1]  the instance id
-- ARGV[2]  now, Unix ms
-- ARGV[3]  the end of this taker's turn, Unix ms: if it has not finished by then (it
--          died, Redis failed), the instance is due again
--
-- Returns 1 when taken, 0 when it is not due (another took it, or its grace has not
-- ended) or no longer reaped.
local due = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not due or tonumber(due) > tonumber(ARGV[2]) then
  return 0
end
redis.call('ZADD', KEYS[1], ARGV[3], ARGV[1])
return 1
