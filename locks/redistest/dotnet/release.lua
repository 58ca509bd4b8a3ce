-- release: only the holder may drop the lock
local v = redis.call('GET', KEYS[1])
if not v then return 0 end
if cjson.decode(v)['holderOid'] ~= ARGV[1] then return 0 end
redis.call('ZREM', KEYS[2], KEYS[1])
return redis.call('DEL', KEYS[1])
