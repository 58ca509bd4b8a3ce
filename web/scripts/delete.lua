-- delete.lua: delete an approval request row only if it is still exactly the value
-- the caller read, and drop it from its tenant's index. The tenant's seed marker is
-- left alone, so a deleted row stays deleted.
--
-- KEYS[1]  the row: demo:{<tenant>}:ApprovalRequest:<uid>
-- KEYS[2]  the index of the tenant's rows: demoidx:{<tenant>}:ApprovalRequest (a set of uids)
-- ARGV[1]  the value the caller read
-- ARGV[2]  the row's uid
--
-- Returns {1} when deleted, {0} when the row is gone, {2, current} when it changed
-- since the caller read it.
local cur = redis.call('GET', KEYS[1])
if not cur then
  return {0}
end
if cur ~= ARGV[1] then
  return {2, cur}
end
redis.call('DEL', KEYS[1])
redis.call('SREM', KEYS[2], ARGV[2])
return {1}
