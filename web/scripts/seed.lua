-- seed.lua: give a tenant its starting set of approval requests, once. The seed
-- marker says the tenant was seeded; while it stands, nothing is seeded again, so a
-- deleted row stays deleted. A Redis that restarted empty has lost the marker with the
-- rows, and the tenant is seeded afresh.
--
-- KEYS[1]     the seed marker: demoseed:{<tenant>}:ApprovalRequest
-- KEYS[2]     the index of the tenant's rows: demoidx:{<tenant>}:ApprovalRequest (a set of uids)
-- KEYS[2+i]   the row of the i-th seed row (i from 1): demo:{<tenant>}:ApprovalRequest:<uid>
-- ARGV[1]     the marker's value (when it was seeded, for people reading Redis)
-- ARGV[2i], ARGV[2i+1]   the uid and the value of the i-th seed row
--
-- Returns the number of rows written: 0 when the tenant was seeded already.
if redis.call('EXISTS', KEYS[1]) == 1 then
  return 0
end
local n = 0
for i = 3, #KEYS do
  local uid = ARGV[2 * (i - 2)]
  local val = ARGV[2 * (i - 2) + 1]
  -- A row that survived (the marker alone was lost) is kept as it is.
  if redis.call('SET', KEYS[i], val, 'NX') then
    n = n + 1
  end
  redis.call('SADD', KEYS[2], uid)
end
redis.call('SET', KEYS[1], ARGV[1])
return n
