-- The .NET release, announcing at once on lockhub's change feed.
-- KEYS[1] lock:{<tenant>}:<type>:<uid>   KEYS[2] lockidx:{<tenant>}:<type>
-- KEYS[3] lockval:{<tenant>}:<type>      KEYS[4] lockfeed:{<tenant>}
-- ARGV[1] holder oid   ARGV[2] tenant   ARGV[3] now, RFC 3339 UTC with milliseconds
local v = redis.call('GET', KEYS[1])
if not v then return 0 end
if cjson.decode(v)['holderOid'] ~= ARGV[1] then return 0 end
redis.call('ZREM', KEYS[2], KEYS[1])
redis.call('DEL', KEYS[1])
-- lockhub keeps the value it last announced: drop it, or lockhub announces this again
redis.call('HDEL', KEYS[3], KEYS[1])
local feed = redis.call('HMGET', KEYS[4], 'command', 'channel')
if feed[1] then -- someone watches this tenant
  redis.call(feed[1], feed[2], ARGV[2] .. '\n{"type":"lock","op":"Released","lock":' .. v .. ',"at":"' .. ARGV[3] .. '"}')
end
return 1
