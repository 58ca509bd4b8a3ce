-- line: the waiting line and the hand-off (PROTOCOL.md §11, version 3). Prepended, after
-- prelude.lua and people.lua, to every script that changes a lock (scripts.go), so the
-- script that finds a lock free gives it to the next person in line in the same atomic
-- step, and announces the viewers whenever the holder changes.
--
-- A caller that passes the line block has the line kept; without it (another program
-- running these scripts) nothing is handed off or announced. The block is 5 arguments
-- at the position the script's header names (lining below), after the retention:
--   ARGV[l]    a shift of the server's clock, ms: 0 but in tests (views run out by the
--              Redis server's clock, as presence.lua reads it)
--   ARGV[l+1]  now, RFC 3339 UTC with ms: a hand-off's acquiredAtUtc
--   ARGV[l+2]  now plus the lease, the same way: its expiresAtUtc
--   ARGV[l+3]  the lease, ms
--   ARGV[l+4]  the presence keys' margin, ms (presence.lua's)
-- Two keys of the entity besides those of people.lua, built from its lock key (all in
-- the tenant's slot):
--   lockconn:{tenant}:type:uid  the sockets that hold the lock (prelude.lua, attach)
--   lockhand:{tenant}:type:uid  string: the socket a hand-off gave the lock to, for the
--                               lease: when that socket's view ends before any hub took
--                               the lock up, handed.lua releases it

local lineOn = nil

local function lining(a)
  if not ARGV[a] or ARGV[a] == '' then return end
  lineOn = {shift = ARGV[a], at = ARGV[a + 1], til = ARGV[a + 2], lease = tonumber(ARGV[a + 3]), margin = ARGV[a + 4]}
end

-- entityOf returns the tenant, type and uid of a lock key: none of them needs escaping
-- in JSON (PROTOCOL.md §1's names).
local function entityOf(k)
  return string.match(k, '^lock:{([^}]*)}:([^:]+):(.+)$')
end

local function presenceHead(k)
  local tenant, typ, uid = entityOf(k)
  return tenant .. '\n{"type":"presence","entityType":"' .. typ .. '","entityUid":"' .. uid .. '","viewers":'
end

-- announcePeople announces the viewers of the entity of k when they changed: holder
-- holds its lock now (nil: nobody). read is what handoff read of them (people.lua), or
-- nil.
local function announcePeople(k, holder, read)
  if not lineOn then return end
  local views, viewers, line = peopleKeys(k)
  if not read and redis.call('EXISTS', viewers) == 0 then return end
  local now = (read and read.now) or serverNow(lineOn.shift)
  people(views, viewers, line, holder, now, lineOn.margin, ARGV[1], ARGV[2], presenceHead(k), read)
end

-- handoff gives the lock k, just found free, to the first person in line still allowed
-- it (PROTOCOL.md §4's quotas: one at a limit is passed over and stays in line), through
-- that person's earliest waiting socket, exactly as a claim by that socket would: the
-- lock written, the person's index, the socket attached, Acquired published and
-- recorded (reason handoff, no actor), and a handoff message on the feed for the hubs.
-- prev is whose lock just ended: it never goes straight back to them, and their sockets
-- that still view with intent edit start waiting now, at the back. A line entry
-- without a lock head (written before it had one) is passed over. Returns the new
-- holder's oid, or nil, and what it read of the views and the line, for people.lua
-- (nil when the line is empty). The line of one entity is small: its work is bounded
-- by it. clean says the lock's sockets key is gone already (the caller deleted it).
local function handoff(k, idx, vals, prev, clean)
  if not lineOn then return nil end
  local views, _, line = peopleKeys(k)
  local ln = redis.call('HGETALL', line)
  if #ln == 0 then return nil end
  local now = serverNow(lineOn.shift)
  local vs = redis.call('ZRANGE', views, 0, -1, 'WITHSCORES')
  local read = {vs = vs, ln = ln, now = now}
  local ends = {}
  for i = 1, #vs, 2 do ends[vs[i]] = tonumber(vs[i + 1]) end
  local queue = {}
  for i = 1, #ln, 2 do
    local sock = ln[i]
    local at, oid, head = string.match(ln[i + 1], '^([^\t]*)\t([^\t]*)\t(.*)$')
    if at and ends[sock] and ends[sock] > now then
      if oid == prev then
        ln[i + 1] = string.format('%.0f', now) .. '\t' .. oid .. '\t' .. head
        redis.call('HSET', line, sock, ln[i + 1])
      else
        queue[#queue + 1] = {sock, tonumber(at) or 0, oid, head}
      end
    end
  end
  table.sort(queue, function(a, b)
    if a[2] ~= b[2] then return a[2] < b[2] end
    return a[1] < b[1]
  end)
  local tried = {}
  for _, q in ipairs(queue) do
    local sock, oid, head = q[1], q[3], q[4]
    if not tried[oid] and head ~= '' then
      tried[oid] = true
      local limit = nil
      if share ~= nil then limit = over(oid, true) end
      if limit then
        passed[#passed + 1] = limit
      else
        local value = head .. lineOn.at .. '","expiresAtUtc":"' .. lineOn.til .. '"}'
        local expiry = tonumber(ARGV[5]) + lineOn.lease
        store(k, idx, vals, value, lineOn.lease, expiry, lineOn.lease + tonumber(ARGV[6]))
        own(oid, k, expiry)
        local rest = string.sub(k, 6)
        if not clean then redis.call('DEL', 'lockconn:' .. rest) end
        attach('lockconn:' .. rest, sock, lineOn.lease)
        redis.call('SET', 'lockhand:' .. rest, sock, 'PX', lineOn.lease)
        publish('Acquired', value)
        record('Acquired', k, value, 'handoff', 'null')
        if ARGV[1] ~= '' then
          local tenant, typ, uid = entityOf(k)
          redis.call(ARGV[1], ARGV[2], tenant .. '\n{"type":"handoff","entityType":"' .. typ .. '","entityUid":"' .. uid ..
            '","lock":' .. value .. ',"to":' .. cjson.encode(oid) .. ',"conn":' .. cjson.encode(sock) .. '}')
        end
        handed[#handed + 1] = value
        return oid, read
      end
    end
  end
  return nil, read
end

-- freed hands the lock k, just found free (whose holder was prev), to the next in line,
-- and announces the viewers. It returns the new holder, or nil. clean: as handoff.
local function freed(k, idx, vals, prev, clean)
  local to, read = handoff(k, idx, vals, prev, clean)
  announcePeople(k, to, read)
  return to
end
