-- claim: KEYS[1] lock key, KEYS[2] index. ARGV[1] json, ARGV[2] lease ms, ARGV[3] expiry score
if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 0 end
redis.call('ZADD', KEYS[2], ARGV[3], KEYS[1])
redis.call('PEXPIRE', KEYS[2], ARGV[2])
return 1
