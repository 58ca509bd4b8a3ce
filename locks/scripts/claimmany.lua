-- claimmany: claim many entities of one type at once, all or nothing (PROTOCOL.md §12,
-- version 3). One script decides the whole claim: every entity is free or the caller's
-- and all are claimed (the caller's renewed), or nothing changes.
--
-- Go read the entities' values first (MGET) and built, for each, the value to write: a
-- new lock for a free one, the caller's lock renewed (acquiredAtUtc kept) for one the
-- caller holds. The script writes only if none changed since (compare-and-set, as
-- renew.lua): else it answers raced and Go reads again.
--
-- KEYS[1]  lock key of the first entity  lock:{tenant}:type:uid  (the slot; every lock key
--          of the call is built from ARGV[13])
-- KEYS[2]  index key    lockidx:{tenant}:type
-- KEYS[3]  values key   lockval:{tenant}:type
-- KEYS[4]  sockets key of the first entity (unused: built per entity, lockconn:...)
-- KEYS[5]  seen key     lockseen:{tenant}:type  (optional: see prelude.lua)
-- KEYS[6]  audit key    lockaudit:{tenant}  (stream; optional: see prelude.lua)
-- ARGV[1..6]  the event to publish, the clock, the index margin: see prelude.lua
-- ARGV[7]  holder oid of the caller
-- ARGV[8]  lease, ms
-- ARGV[9]  expiry, Unix ms (the index score)
-- ARGV[10] TTL for the index and values keys, ms
-- ARGV[11] id of the claiming socket, or "" (HTTP)
-- ARGV[12] n, how many entities (1 to 100: Go checked)
-- ARGV[13] the lock key prefix lock:{tenant}:type:
-- ARGV[14..13+3n] per entity: uid, the value Go read ("" for none), the value to write
-- ARGV[a..a+4], a = 14+3n  the audit entry: at, cap, actor oid, actor name, reason
--          (prelude.lua); each Acquired entry's reason is claim
-- ARGV[a+5..a+10] the share block (prelude.lua); optional
-- ARGV[a+11] the audit's retention, ms (prelude.lua); optional
-- ARGV[a+12..a+16] the line block (line.lua); optional
--
-- An entity found free while someone waits goes to the line first (line.lua), whatever
-- the rest of the call does: that is the line's change, not the caller's.
--
-- Returns {status, value, found, trimmed, handed, passed}, status one of (manyReply in
-- scripts.go):
--   "acquired"  every entity is the caller's now: each free one published Acquired and
--               audited, each of the caller's published Renewed; value = n
--   "locked"    someone else holds some; value = their stored values; nothing written
--   "raced"     a value changed since Go read it, still free or the caller's; nothing
--               written; Go reads again
--   "tooMany"   the free ones would pass the person's or the tenant's quota; value = the
--               setting; nothing written
--   "rateLimited"  the caller has fewer changes left than free entities; value = ms
--               until enough are; nothing written
local n = tonumber(ARGV[12])
local a = 14 + 3 * n
auditing(a, a + 11)
sharing(a + 5)
lining(a + 12)
local oid = ARGV[7]

local ks, vs, locked = {}, {}, {}
local raced, fresh = false, 0
for i = 1, n do
  local j = 14 + 3 * (i - 1)
  local k = ARGV[13] .. ARGV[j]
  local v = redis.call('GET', k)
  catchup(k, v, KEYS[2], KEYS[3])
  if not v and handoff(k, KEYS[2], KEYS[3], nil) then -- free while someone waits: theirs first
    v = redis.call('GET', k)
    announcePeople(k, holderOf(v))
  end
  ks[i], vs[i] = k, v
  if v and not holds(v, oid) then
    locked[#locked + 1] = v
  elseif (v or '') ~= ARGV[j + 1] then
    raced = true
  elseif not v then
    fresh = fresh + 1
  end
end
if #locked > 0 then return reply('locked', locked) end
if raced then return reply('raced', false) end

-- The fair share, for the batch as a whole (PROTOCOL.md §4, §12).
if share ~= nil and fresh > 0 and named(oid) then
  local live = '(' .. ARGV[5]
  if share.person > 0 and held(oid, share.person - fresh + 1) + fresh > share.person then
    return reply('tooMany', 'max-locks-per-person')
  end
  if share.tenant > 0 then
    local t = 0
    for typ in string.gmatch(share.types, '[^,]+') do
      t = t + redis.call('ZCOUNT', 'lockidx:' .. share.tag .. ':' .. typ, live, '+inf')
    end
    if t + fresh > share.tenant then return reply('tooMany', 'max-locks-per-tenant') end
  end
  local wait = take(oid, fresh)
  if wait > 0 then return reply('rateLimited', tostring(wait)) end
end

-- store() and own() of prelude.lua for each entity, with the keys every entity shares
-- (the index, the values hash, the seen set, the person's index) pruned and given
-- their TTL once: a call's work stays within a few milliseconds at 100 entities.
local mine = named(oid) and person_key(oid)
if mine then redis.call('ZREMRANGEBYSCORE', mine, '-inf', ARGV[5]) end
for i = 1, n do
  local j = 14 + 3 * (i - 1)
  local k, value = ks[i], ARGV[j + 2]
  local conns = 'lockconn:' .. string.sub(k, 6)
  redis.call('SET', k, value, 'PX', ARGV[8])
  redis.call('ZADD', KEYS[2], ARGV[9], k)
  redis.call('HSET', KEYS[3], k, value)
  see(k, ARGV[9])
  if mine then redis.call('ZADD', mine, ARGV[9], k) end
  if vs[i] then
    attach(conns, ARGV[11], ARGV[8])
    publish('Renewed', value)
  else
    redis.call('DEL', conns) -- sockets of a lease that ran out
    attach(conns, ARGV[11], ARGV[8])
    publish('Acquired', value)
    record('Acquired', k, value, why, actor)
    announcePeople(k, oid)
  end
end
extend(KEYS[2], ARGV[10])
extend(KEYS[3], ARGV[10])
if seen then extend(seen, ARGV[10]) end
if mine then extend(mine, tonumber(ARGV[9]) - tonumber(ARGV[5]) + tonumber(ARGV[6])) end
return reply('acquired', tostring(n))
