-- seed.lua: give a tenant its starting set of approval requests when the whole set is
-- gone (a Redis that restarted empty), and never bring a deleted row back.
--
-- The index holds the uid of every row the tenant was seeded with, deleted or not
-- (delete.lua leaves it), so it is never empty while the set stands, and a uid in it
-- whose row is missing is a deleted row. When the index is gone but some row
-- survived, the set is not gone: the index is rebuilt and the missing rows stay
-- deleted.
--
-- KEYS[1]     the index of the tenant's rows: demoidx:{<tenant>}:ApprovalRequest (a set of uids)
-- KEYS[1+i]   the row of the i-th seed row (i from 1): demo:{<tenant>}:ApprovalRequest:<uid>
-- ARGV[2i-1], ARGV[2i]   the uid and the value of the i-th seed row
--
-- Returns the number of rows written: 0 when the set was there.
if redis.call('EXISTS', KEYS[1]) == 1 then
  return 0
end
local rows = {}
for i = 2, #KEYS do
  rows[#rows + 1] = KEYS[i]
end
local survived = redis.call('EXISTS', unpack(rows)) > 0
local n = 0
for i = 2, #KEYS do
  local uid = ARGV[2 * (i - 1) - 1]
  if not survived then
    redis.call('SET', KEYS[i], ARGV[2 * (i - 1)])
    n = n + 1
  end
  redis.call('SADD', KEYS[1], uid)
end
return n
