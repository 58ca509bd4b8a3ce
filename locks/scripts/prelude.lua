-- prelude: prepended by Go to every script of this folder (scripts.go), so the
-- publishing and holder rules are written once.
--
-- Every script takes the same first four arguments, for the change event it publishes
-- in the same atomic step as the change it makes (so no change goes unannounced, and
-- the events of one entity leave Redis in the order the changes happened):
-- ARGV[1]  "PUBLISH", "SPUBLISH" (a cluster: the channel is in the tenant's slot) or ""
-- ARGV[2]  the tenant's channel
-- ARGV[3]  message head: "<tenant>\n{\"type\":\"lock\",\"op\":\""
-- ARGV[4]  message tail: ",\"at\":\"<RFC 3339, ms>\"}"
-- The event's lock is the stored value, byte for byte: Lua never re-encodes it.

local function publish(op, value, extra)
  if ARGV[1] ~= '' then
    redis.call(ARGV[1], ARGV[2], ARGV[3] .. op .. '","lock":' .. value .. (extra or '') .. ARGV[4])
  end
end

-- decode returns the stored value's decoded table, or nil when it is not JSON.
-- holds says whether the stored value is a lock of oid.
local function decode(v)
  local ok, d = pcall(cjson.decode, v)
  if ok and type(d) == 'table' then return d end
  return nil
end

local function holds(v, oid)
  local d = decode(v)
  return d ~= nil and d['holderOid'] == oid
end

-- extend keeps a key alive at least ttl ms: an index lives as long as its
-- latest-expiring lock (plus a margin), never shorter.
local function extend(key, ttl)
  if redis.call('PTTL', key) < tonumber(ttl) then redis.call('PEXPIRE', key, ttl) end
end

-- settle gives the index and the values hash the expiry of the latest-expiring lock
-- left, plus the margin, or deletes them when none is left: after a release they must
-- not outlive their locks by more than the margin (extend never shortens).
local function settle(idx, vals, margin)
  local top = redis.call('ZRANGE', idx, -1, -1, 'WITHSCORES')
  if #top == 0 then
    redis.call('DEL', idx, vals)
    return
  end
  local at = tonumber(top[2]) + tonumber(margin)
  redis.call('PEXPIREAT', idx, at)
  redis.call('PEXPIREAT', vals, at)
end

-- attach remembers which socket claimed a lock, so a closing socket releases it only
-- when no other socket of the holder uses it (detach.lua).
local function attach(conns, conn, lease)
  if conn ~= '' then
    redis.call('SADD', conns, conn)
    redis.call('PEXPIRE', conns, lease)
  end
end

-- ---- the script ----
