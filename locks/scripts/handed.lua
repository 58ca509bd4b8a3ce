-- handed: the view of a socket that a hand-off gave a lock to has ended (its socket
-- closed and the release grace passed, or its instance died and the view ran out:
-- PROTOCOL.md §11), and no hub took the lock up for it: release it as a lock of a
-- closed socket is released (detach.lua), handing it to the next in line.
--
-- KEYS[1..6]  as detach.lua: lock, index, values, sockets, seen, audit keys
-- and, built from KEYS[1] like line.lua's, lockhand:{tenant}:type:uid (string: the socket
-- a hand-off gave the lock to)
-- ARGV[1..6]  the event to publish, the clock, the index margin: see prelude.lua
-- ARGV[7]  id of the socket whose view ended
-- ARGV[8..12] the audit entry: at, cap, actor oid, actor name, reason (prelude.lua); the
--          Released entry's reason is disconnect, its actor the holder
-- ARGV[13..18] the share block (prelude.lua)
-- ARGV[19] the audit's retention, ms (prelude.lua)
-- ARGV[20..24] the line block (line.lua)
--
-- Returns {status, value, found, trimmed, handed, passed}, status one of (handedReply in
-- scripts.go):
--   "released"  the socket was the one handed the lock and the last that held it: dropped,
--               published Released (and perhaps handed on); value = the value that was stored
--   "kept"      the lock was not handed to this socket, or another socket of its holder
--               holds it too (that socket is forgotten); value nil
auditing(8, 19)
sharing(13)
lining(20)
local hand = 'lockhand:' .. string.sub(KEYS[1], 6)
if redis.call('GET', hand) ~= ARGV[7] then return reply('kept', false) end
redis.call('DEL', hand)
local v = redis.call('GET', KEYS[1])
catchup(KEYS[1], v, KEYS[2], KEYS[3])
if redis.call('SREM', KEYS[4], ARGV[7]) == 0 or redis.call('SCARD', KEYS[4]) > 0 then return reply('kept', false) end
if not v or decode(v) == nil then return reply('kept', false) end
local d = decode(v)
disown(d['holderOid'], KEYS[1])
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], KEYS[1])
redis.call('HDEL', KEYS[3], KEYS[1])
unsee(KEYS[1])
settle(KEYS[2], KEYS[3])
publish('Released', v)
record('Released', KEYS[1], v, why, person(d['holderOid'], d['holderName']))
freed(KEYS[1], KEYS[2], KEYS[3], d['holderOid'], true)
return reply('released', v)
