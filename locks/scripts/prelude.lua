-- prelude: prepended by Go to every script of this folder (scripts.go), so the
-- publishing, holder and catching-up rules are written once.
--
-- Every script takes the same first six arguments:
-- ARGV[1]  "PUBLISH", "SPUBLISH" (a cluster: the channel is in the tenant's slot) or ""
-- ARGV[2]  the tenant's channel
-- ARGV[3]  message head: "<tenant>\n{\"type\":\"lock\",\"op\":\""
-- ARGV[4]  message tail: ",\"at\":\"<RFC 3339, ms>\"}"
-- ARGV[5]  now, Unix ms (the caller's clock, the one that wrote the index scores)
-- ARGV[6]  the index margin, ms: the index, the values hash and the seen set
--          outlive their latest-expiring lock by this much (PROTOCOL.md §1)
-- and KEYS[5], the seen set lockseen:{tenant}:type (below). A program that runs these
-- scripts with only the four keys its header documented before lockseen existed still
-- works: the seen set is then not kept, and the next sweep finds it out of step and
-- compares everything once (sweep.lua).
-- A script publishes its change event in the same atomic step as the change it makes,
-- so no change goes unannounced and the events of one entity leave Redis in the order
-- the changes happened. The event's lock is the stored value, byte for byte: Lua never
-- re-encodes it.
--
-- Every write script answers {status, value, found, trimmed, handed, passed}: found lists
-- the ops it announced for changes another program made (catchup below), each once;
-- trimmed is how many audit entries the cap dropped before their age (auditDone below);
-- handed the values of the locks it handed to the next in line, and passed the settings
-- (max-locks-per-...) at which it passed someone in line over (line.lua).

local found = {}
local handed, passed = {}, {}

local function publish(op, value, extra)
  if ARGV[1] ~= '' then
    redis.call(ARGV[1], ARGV[2], ARGV[3] .. op .. '","lock":' .. value .. (extra or '') .. ARGV[4])
  end
end

local auditDone -- below, with the audit

local function reply(status, value)
  return {status, value, found, auditDone(), handed, passed}
end

-- person is a {"oid","name"} JSON object of two strings encoded by cjson, or null
-- when there is no oid.
local function person(oid, name)
  if type(oid) ~= 'string' or oid == '' then return 'null' end
  if type(name) ~= 'string' then name = '' end
  return '{"oid":' .. cjson.encode(oid) .. ',"name":' .. cjson.encode(name) .. '}'
end

-- whose is the {"oid","name"} JSON of the holder of the lock d (decoded), or null.
local function whose(d)
  if type(d) ~= 'table' then return 'null' end
  return person(d['holderOid'], d['holderName'])
end

-- The audit stream (PROTOCOL.md §10), KEYS[6]: lockaudit:{tenant}, a Redis Stream
-- with one entry per Acquired, Released, TakenOver, Expired and force release (never
-- Renewed), added in the same atomic step as the change, so the record and the change
-- never disagree. Optional like the seen set: a program that runs these scripts with
-- the five keys documented before the audit existed records nothing. A caller that
-- passes KEYS[6] passes five more arguments at the position its script's header names
-- (auditing below):
--   ARGV[a]    the entry's at: RFC 3339, UTC, ms
--   ARGV[a+1]  the cap: the most entries the stream keeps (exactly: XTRIM MAXLEN)
--   ARGV[a+2]  the actor's oid (who causes the script's own change), or "" for none
--   ARGV[a+3]  the actor's name
--   ARGV[a+4]  the reason of the script's own change (claim, release, decision, ...)
-- and one more after the share block (added after it, so that no argument moved):
--   ARGV[r]    the retention, ms: entries whose stream id is older than now (ARGV[5])
--              minus this are dropped (XTRIM MINID), and the stream expires this long
--              after its newest entry (PEXPIRE); optional: none dropped by age
-- An entry's fields: op, entityType, entityUid, holder, previous (TakenOver and
-- ForceReleased only: whose lock it was), actor ({"oid","name"} JSON, or null), reason,
-- at. Changes of other writers (catchup, the sweep) are recorded with actor null and
-- reason foreign; leases that ran out with reason expiry.
-- Trimming is exact, as PROTOCOL.md §10 says "never holds more than": by age before the
-- script's first entry is added (so a caller's clock far ahead never drops an entry it
-- writes), then by count once the script has added its last (auditDone, which reply
-- calls), so a script recording many entries (a sweep) trims twice, not per entry. What
-- the count drops is then younger than the retention: the trail was too small to keep
-- it as long as promised. The script answers how many (trimmed) and Go warns. An exact
-- trim frees whole macro nodes and marks entries deleted in at most one more
-- (stream-node-max-entries, 100 by default), so its cost stays bounded: after a long
-- silence a trim by age frees whole nodes at once.
-- Only a script that calls auditing records: one that does not (a script of another
-- concept sharing this prelude) may use KEYS[6] for a key of its own.
local audit = nil
local auditAt, auditMax, auditKeep, actor, why = '', '100000', nil, 'null', ''

local function auditing(a, r)
  audit = KEYS[6]
  if not audit then return end
  auditAt, auditMax = ARGV[a], ARGV[a + 1]
  actor = person(ARGV[a + 2], ARGV[a + 3])
  why = ARGV[a + 4] or ''
  if ARGV[r] then auditKeep = tonumber(ARGV[r]) end
end

local recorded = false -- an entry was added since the last auditDone

-- record adds the entry of op on the lock key k, whose value (the holder's) is v;
-- prev, for TakenOver and ForceReleased, is whose lock it was (whose).
local function record(op, k, v, reason, by, prev)
  if not audit then return end
  if auditKeep and not recorded then
    local oldest = math.max(tonumber(ARGV[5]) - auditKeep, 0)
    redis.call('XTRIM', audit, 'MINID', string.format('%.0f', oldest))
  end
  recorded = true
  local typ, uid = string.match(k, '^lock:{[^}]*}:([^:]+):(.+)$')
  local ok, d = pcall(cjson.decode, v)
  local holder = 'null'
  if ok and type(d) == 'table' then holder = whose(d) end
  local fields = {'op', op, 'entityType', typ or '', 'entityUid', uid or '', 'holder', holder}
  if prev then
    fields[#fields + 1] = 'previous'
    fields[#fields + 1] = prev
  end
  fields[#fields + 1] = 'actor'
  fields[#fields + 1] = by
  fields[#fields + 1] = 'reason'
  fields[#fields + 1] = reason
  fields[#fields + 1] = 'at'
  fields[#fields + 1] = auditAt
  redis.call('XADD', audit, '*', unpack(fields))
end

-- auditDone ends what the script recorded: it drops the oldest entries beyond the cap
-- and answers how many, and gives the stream the retention as its TTL, so a tenant
-- that changes nothing more loses its whole trail when its newest entry is too old.
function auditDone()
  if not recorded then return 0 end
  recorded = false
  local n = redis.call('XTRIM', audit, 'MAXLEN', auditMax)
  if auditKeep then redis.call('PEXPIRE', audit, string.format('%.0f', auditKeep)) end
  return n
end

-- decode returns the stored value's decoded table, or nil when it is not a lock
-- (not JSON, or no string holderOid): such a value is never announced.
-- holds says whether the stored value is a lock of oid.
local function decode(v)
  local ok, d = pcall(cjson.decode, v)
  if ok and type(d) == 'table' and type(d['holderOid']) == 'string' then return d end
  return nil
end

local function holds(v, oid)
  local d = decode(v)
  return d ~= nil and d['holderOid'] == oid
end

-- previous is the previousHolder member of a TakenOver event for the lock d (decoded):
-- two JSON strings encoded by cjson, not a re-encoded lock value.
local function previous(d)
  local oid, name = '', ''
  if d ~= nil then
    if type(d['holderOid']) == 'string' then oid = d['holderOid'] end
    if type(d['holderName']) == 'string' then name = d['holderName'] end
  end
  return ',"previousHolder":{"oid":' .. cjson.encode(oid) .. ',"name":' .. cjson.encode(name) .. '}'
end

-- instant returns the Unix ms of an RFC 3339 timestamp as Go or the .NET service writes
-- it (0 to 9 fractional digits, "Z" or an offset), or nil.
local function instant(s)
  if type(s) ~= 'string' then return nil end
  local y, mo, d, h, mi, sec, rest = string.match(s, '^(%d%d%d%d)-(%d%d)-(%d%d)[Tt](%d%d):(%d%d):(%d%d)(.*)$')
  if not y then return nil end
  local frac, zone = string.match(rest, '^%.(%d+)(.*)$')
  if not frac then frac, zone = '', rest end
  local off = 0
  if zone ~= 'Z' and zone ~= 'z' then
    local sign, oh, om = string.match(zone, '^([+-])(%d%d):(%d%d)$')
    if not sign then return nil end
    off = (tonumber(oh) * 60 + tonumber(om)) * 60000
    if sign == '-' then off = -off end
  end
  -- days from civil (H. Hinnant): proleptic Gregorian, March-based years
  y, mo = tonumber(y), tonumber(mo)
  if mo <= 2 then y = y - 1 end
  local era = math.floor(y / 400)
  local yoe = y - era * 400
  local doy = math.floor((153 * ((mo + 9) % 12) + 2) / 5) + tonumber(d) - 1
  local days = era * 146097 + yoe * 365 + math.floor(yoe / 4) - math.floor(yoe / 100) + doy - 719468
  local ms = tonumber(string.sub(frac .. '000', 1, 3))
  return ((days * 24 + tonumber(h)) * 60 + tonumber(mi)) * 60000 + tonumber(sec) * 1000 + ms - off
end

-- extend keeps a key alive at least ttl ms: an index lives as long as its
-- latest-expiring lock (plus a margin), never shorter.
local function extend(key, ttl)
  if redis.call('PTTL', key) < tonumber(ttl) then redis.call('PEXPIRE', key, ttl) end
end

-- Fair share (PROTOCOL.md §4, version 3). A caller that passes the share block has
-- every change its script makes counted for the person and the tenant in the same
-- atomic step as the change, so no two instances, sockets or HTTP calls can together
-- pass a limit. The block is 6 arguments at the position the script's header names
-- (sharing below); without it nothing is counted or kept (another program's scripts):
--   ARGV[s]    the tenant's hash tag, "{<tenant>}"
--   ARGV[s+1]  the lockable types, comma-separated: the tenant's live locks are counted
--              in their indexes, lockidx:{tenant}:<type>, which every writer of
--              PROTOCOL.md §1 keeps (the .NET API's locks count, though never refused)
--   ARGV[s+2]  how many live locks one person may hold (0: no limit)
--   ARGV[s+3]  how many live locks the tenant may hold (0: no limit)
--   ARGV[s+4]  changes a second one person may make (0: no limit)
--   ARGV[s+5]  the burst of changes above that rate
--   (0 means no limit to the script; the store never sends it, since a setting of zero
--   is its default: share.go, setUpShare)
-- Two keys per person, built here from the tag (a takeover's previous holder, or a
-- holder another program wrote, is known only from the stored value), both in the
-- tenant's slot like every key of it:
--   lockmine:{tenant}:<oid>  sorted set: lock key -> expiry (Unix ms) of the person's
--                            locks; what mine reads, and what the person's quota counts
--   lockrate:{tenant}:<oid>  hash: left (changes left), at (Unix ms): a token bucket
local share = nil

local function sharing(a)
  if not ARGV[a] then return end
  share = {tag = ARGV[a], types = ARGV[a + 1], person = tonumber(ARGV[a + 2]), tenant = tonumber(ARGV[a + 3]),
    rate = tonumber(ARGV[a + 4]), burst = tonumber(ARGV[a + 5])}
end

local function person_key(oid)
  return 'lockmine:' .. share.tag .. ':' .. oid
end

local function named(oid)
  return share ~= nil and type(oid) == 'string' and oid ~= ''
end

-- own records that oid holds the lock k until expiry (Unix ms) and drops the person's
-- leases that ran out (no more than the person held); disown forgets k for oid.
local function own(oid, k, expiry)
  if not named(oid) then return end
  local key = person_key(oid)
  redis.call('ZREMRANGEBYSCORE', key, '-inf', ARGV[5])
  redis.call('ZADD', key, expiry, k)
  extend(key, tonumber(expiry) - tonumber(ARGV[5]) + tonumber(ARGV[6]))
end

local function disown(oid, k)
  if named(oid) then redis.call('ZREM', person_key(oid), k) end
end

-- held counts oid's live locks by the person's index. When the count reaches at (a
-- claim would be refused), it first drops the entries whose lock another program
-- released or gave to someone else since (no lockhub script has seen it yet), and
-- counts again: at most the quota and 16 keys read, and only then.
local function held(oid, at)
  local key = person_key(oid)
  local live = '(' .. ARGV[5]
  local n = redis.call('ZCOUNT', key, live, '+inf')
  if n < at then return n end
  local ks = redis.call('ZRANGE', key, live, '+inf', 'BYSCORE', 'LIMIT', 0, share.person + 16)
  for _, k in ipairs(ks) do
    if not holds(redis.call('GET', k), oid) then redis.call('ZREM', key, k) end
  end
  return redis.call('ZCOUNT', key, live, '+inf')
end

-- over returns the setting a new lock of oid would pass, or nil: the person's quota
-- (what they hold, see held), and the tenant's when the lock is free (fresh; a takeover
-- adds none to the tenant).
local function over(oid, fresh)
  if not named(oid) then return nil end
  local live = '(' .. ARGV[5]
  if share.person > 0 and held(oid, share.person) >= share.person then
    return 'max-locks-per-person'
  end
  if fresh and share.tenant > 0 then
    local n = 0
    for t in string.gmatch(share.types, '[^,]+') do
      n = n + redis.call('ZCOUNT', 'lockidx:' .. share.tag .. ':' .. t, live, '+inf')
    end
    if n >= share.tenant then return 'max-locks-per-tenant' end
  end
  return nil
end

-- take spends n of oid's changes and answers 0, or, when fewer than n are left, spends
-- nothing and answers the ms until n are. The bucket refills at share.rate a second up
-- to share.burst; clocks of instances that disagree a little only shift a refill.
local function take(oid, n)
  if not named(oid) or share.rate <= 0 then return 0 end
  local key = 'lockrate:' .. share.tag .. ':' .. oid
  local now = tonumber(ARGV[5])
  local st = redis.call('HMGET', key, 'left', 'at')
  local left, at = tonumber(st[1]), tonumber(st[2])
  if left == nil or at == nil then left, at = share.burst, now end
  left = math.min(share.burst, left + math.max(now - at, 0) * share.rate / 1000)
  if left < n then return math.ceil((n - left) * 1000 / share.rate) end
  redis.call('HSET', key, 'left', tostring(left - n), 'at', tostring(math.max(now, at)))
  redis.call('PEXPIRE', key, math.ceil(share.burst * 1000 / share.rate) + 1000)
  return 0
end

-- The seen set, KEYS[5] (nil when a caller passed only four keys): a sorted set, per
-- lock key whose value the values hash holds, of the index score lockhub last knew for
-- it (0: no member), a mirror of the index as lockhub last knew it. Every writer that
-- keeps PROTOCOL.md §1's layout changes the index score when it changes a lock, so the
-- sweep compares the index with its mirror, not values with copies, and reads a lock
-- only where the index moved (sweep.lua). It holds exactly the keys of the values hash:
-- every script that sets or deletes a copy sets or deletes its score in the same place,
-- and it lives and dies with the index and the values hash.
local seen = KEYS[5]

-- see records score as the index score lockhub knows for k; unsee forgets k.
local function see(k, score)
  if seen then redis.call('ZADD', seen, score, k) end
end

local function unsee(k)
  if seen then redis.call('ZREM', seen, k) end
end

-- store writes value as the lock k for lease ms, scored at expiry in the index, as the
-- copy in the values hash and in the seen set, and keeps those three alive at least
-- ttl ms: what claim, renew and takeover write.
local function store(k, idx, vals, value, lease, expiry, ttl)
  redis.call('SET', k, value, 'PX', lease)
  redis.call('ZADD', idx, expiry, k)
  redis.call('HSET', vals, k, value)
  see(k, expiry)
  extend(idx, ttl)
  extend(vals, ttl)
  if seen then extend(seen, ttl) end
end

-- settle gives the index, the values hash and the seen set the expiry of the
-- latest-expiring lock left, plus the margin, or deletes them when none is left: after
-- a release they must not outlive their locks by more than the margin (extend never
-- shortens).
-- settled remembers the last settle: the index and when the three keys expire now (0:
-- deleted), so a hand-off right after it (line.lua) knows their TTLs without asking.
local settled = nil

local function settle(idx, vals)
  local top = redis.call('ZRANGE', idx, -1, -1, 'WITHSCORES')
  if #top == 0 then
    redis.call('DEL', idx, vals)
    if seen then redis.call('DEL', seen) end
    settled = {idx = idx, at = 0}
    return
  end
  local at = tonumber(top[2]) + tonumber(ARGV[6])
  redis.call('PEXPIREAT', idx, at)
  redis.call('PEXPIREAT', vals, at)
  if seen then redis.call('PEXPIREAT', seen, at) end
  settled = {idx = idx, at = at}
end

-- attach remembers which socket claimed a lock, so a closing socket releases it only
-- when no other socket of the holder uses it (detach.lua).
local function attach(conns, conn, lease)
  if conn ~= '' then
    redis.call('SADD', conns, conn)
    redis.call('PEXPIRE', conns, lease)
  end
end

-- A release made while a dead, not yet found, instance's socket keeps the lock
-- (PROTOCOL.md §4, "An instance that dies"). A socket that lets go of a lock that
-- another socket of its holder keeps (release.lua, detach.lua) notes when, on the
-- Redis server's clock (Unix ms), in lockleft:{tenant}:type:uid, built here from the
-- sockets key (same tag, same slot), for as long as the sockets live. When the instance
-- of the sockets left is found dead and its last heartbeat is older than that, they
-- kept the lock only by being dead: it goes at once (forget.lua), not a grace later.
local function left_key(conns)
  return 'lockleft:' .. string.sub(conns, 10) -- after 'lockconn:'
end

-- The note expires at the sockets' own expiry (PEXPIRETIME, PXAT), never a millisecond
-- after it: a TTL read with PTTL and set again with PX lands a millisecond late whenever
-- the server's clock ticks between the script's start and the SET.
local function left(conns)
  local at = redis.call('PEXPIRETIME', conns)
  if at <= 0 then return end
  local t = redis.call('TIME')
  redis.call('SET', left_key(conns), tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000), 'PXAT', at)
end

-- Other writers (PROTOCOL.md §8). The values hash keeps, per lock key, the value
-- lockhub last announced; every lockhub script keeps it in step with the key. A key
-- that differs from its copy was changed by another program (the .NET API), which
-- announces nothing: catchup announces that change and takes the key's value as the
-- new copy, so each foreign change is announced once, whoever looks first, and before
-- any later change of the entity. A value that is not a lock is left alone.

-- ended is how a lock that is gone ended: expiry (Unix ms) not later than now, give or
-- take a second of clock skew, is Expired; anything else was deleted, Released.
local function ended(expiry)
  if expiry ~= nil and expiry <= tonumber(ARGV[5]) + 1000 then return 'Expired' end
  return 'Released'
end

local function announce(op, v, extra)
  publish(op, v, extra)
  found[#found + 1] = op
end

-- announceFound announces a change nobody announced on lock key k and records it: a
-- lease run out (expiry) or another writer's change (foreign), caused by no actor
-- lockhub knows. prev is whose lock it was, for TakenOver.
local function announceFound(op, k, v, extra, prev)
  announce(op, v, extra)
  if op == 'Expired' then
    record(op, k, v, 'expiry', 'null')
  elseif op ~= 'Renewed' then
    record(op, k, v, 'foreign', 'null', prev)
  end
end

-- changed announces that key k now holds v (a lock) where the copy was c (a lock or
-- false), and keeps v as the copy and score (k's index score, or nil: read here) as
-- its seen score.
local function changed(k, v, c, idx, vals, score)
  redis.call('HSET', vals, k, v)
  score = score or redis.call('ZSCORE', idx, k)
  see(k, score or 0)
  local is = decode(v)
  if score then own(is['holderOid'], k, score) end
  if not c then
    announceFound('Acquired', k, v)
    return
  end
  local was = decode(c)
  if was ~= nil and was['holderOid'] ~= is['holderOid'] then disown(was['holderOid'], k) end
  if was ~= nil and was['holderOid'] == is['holderOid'] then
    announceFound('Renewed', k, v)
  else
    announceFound('TakenOver', k, v, previous(was), whose(was))
  end
end

-- gone announces that the lock whose copy was c is gone: Expired or Released, by the
-- index score when the member is left, else by the copy's expiresAtUtc.
local function gone(k, c, idx, vals)
  local score = redis.call('ZSCORE', idx, k)
  redis.call('ZREM', idx, k)
  redis.call('HDEL', vals, k)
  unsee(k)
  local expiry = tonumber(score)
  local d = decode(c)
  if d ~= nil then disown(d['holderOid'], k) end
  if expiry == nil and d ~= nil then expiry = instant(d['expiresAtUtc']) end
  announceFound(ended(expiry), k, c)
end

-- catchup announces what another program did to the lock key k (stored value v, or
-- false) since lockhub last knew it; every write script calls it before it acts.
local function catchup(k, v, idx, vals)
  local c = redis.call('HGET', vals, k)
  if v == c or (v and decode(v) == nil) then return end
  if c and decode(c) == nil then c = false end
  if not v then
    if c then gone(k, c, idx, vals) end
    return
  end
  changed(k, v, c, idx, vals)
  -- the copy lives as long as its lock, plus the margin, whatever the script does next
  local ttl = math.max(redis.call('PTTL', k), 0) + tonumber(ARGV[6])
  extend(vals, ttl)
  if seen then extend(seen, ttl) end
end

-- ---- the script ----
