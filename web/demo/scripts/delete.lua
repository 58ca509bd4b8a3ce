-- delete.lua: delete an approval request row only if it is still exactly the value
-- the caller read. Its uid stays in the tenant's index (see seed.lua): that is how a
-- deleted row stays deleted, even when every row is.
--
-- KEYS[1]  the row: demo:{<tenant>}:ApprovalRequest:<uid>
-- ARGV[1]  the value the caller read
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
return {1}
