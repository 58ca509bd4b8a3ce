-- cas.lua: replace an approval request row only if it is still exactly the value the
-- caller read, so a decision made on a pending row can never overwrite another
-- decision, with or without locks (PROTOCOL.md §5, "The demo domain"). Go builds the
-- new value; the script only compares bytes, it never decodes or re-encodes a row.
--
-- KEYS[1]  the row: demo:{<tenant>}:ApprovalRequest:<uid>
-- ARGV[1]  the value the caller read
-- ARGV[2]  the value to store in its place
--
-- Returns {1} when stored, {0} when the row is gone, {2, current} when it changed
-- since the caller read it (the caller decides again on current).
local cur = redis.call('GET', KEYS[1])
if not cur then
  return {0}
end
if cur ~= ARGV[1] then
  return {2, cur}
end
redis.call('SET', KEYS[1], ARGV[2])
return {1}
