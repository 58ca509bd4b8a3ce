-- forget: a socket of an instance found dead stops counting for the two-tab rule at
-- once, where another socket uses the lock: a live tab of its holder that then
-- releases it is its last socket, and the lock goes (release.lua). The dead socket's
-- id is kept where it is the last: the lock is then released a grace later, as for
-- any socket that closed (detach.lua, by the reaper), unless the holder's other
-- sockets let go of the lock after the dead instance was last seen (KEYS[2], noted by
-- release.lua and detach.lua: prelude.lua's left): they left it to the dead socket
-- alone, a release that waited for the death to be found (PROTOCOL.md §4), and the
-- caller detaches it at once. Not prepended with prelude.lua: it changes neither the
-- lock nor the index, and publishes nothing.
--
-- KEYS[1]  sockets key  lockconn:{tenant}:type:uid
-- KEYS[2]  left key     lockleft:{tenant}:type:uid  (string: Unix ms, the Redis
--          server's clock, when a socket last let go of the lock while others kept it;
--          optional)
-- ARGV[1]  id of the dead socket
-- ARGV[2]  when its instance last refreshed its liveness record, Unix ms, on the clock
--          lockleft: is written with (optional, with KEYS[2])
--
-- Returns 1 when forgotten, 2 when it is the last and the holder's other sockets let
-- go since ARGV[2] (to detach now, with release), 0 when it was not in the set or is
-- its last.
if redis.call('SISMEMBER', KEYS[1], ARGV[1]) == 0 then
  return 0
end
if redis.call('SCARD', KEYS[1]) < 2 then
  if KEYS[2] and ARGV[2] then
    local at = redis.call('GET', KEYS[2])
    if at and tonumber(at) >= tonumber(ARGV[2]) then return 2 end
  end
  return 0
end
redis.call('SREM', KEYS[1], ARGV[1])
return 1
