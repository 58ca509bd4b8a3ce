-- forget: a socket of an instance found dead stops counting for the two-tab rule at
-- once, where another socket uses the lock: a live tab of its holder that then
-- releases it is its last socket, and the lock goes (release.lua). The dead socket's
-- id is kept where it is the last: the lock is then released a grace later, as for
-- any socket that closed (detach.lua, by the reaper). Not prepended with prelude.lua:
-- it changes neither the lock nor the index, and publishes nothing.
--
-- KEYS[1]  sockets key  lockconn:{tenant}:type:uid
-- ARGV[1]  id of the dead socket
--
-- Returns 1 when forgotten, 0 when it was not in the set or is its last.
if redis.call('SISMEMBER', KEYS[1], ARGV[1]) == 0 or redis.call('SCARD', KEYS[1]) < 2 then
  return 0
end
redis.call('SREM', KEYS[1], ARGV[1])
return 1
