-- people: who views an entity, and where each stands (PROTOCOL.md §9, §11). Prepended
-- to presence.lua, and after prelude.lua and line.lua to the scripts that change a lock
-- (scripts.go), so that the viewers are worked out, and announced, by one function
-- wherever they change: a view, or a lock that changes hands. It uses no key or
-- argument of its own: each caller names them.
--
-- An entity's presence keys, built from its lock key lock:{tenant}:type:uid (all in the
-- tenant's slot):
--   lockview:{tenant}:type:uid    sorted set: socket id -> when its view runs out (Unix ms,
--                                 the Redis server's clock)
--   lockviewer:{tenant}:type:uid  hash: socket id -> "<oid>\t<since ms>\t<viewer JSON>";
--                                 "viewers" -> the list last announced, "version" -> its version
--   lockline:{tenant}:type:uid    hash: socket id -> "<waiting since ms>\t<oid>\t<lock head>"
--                                 for each socket viewing with intent edit (version 3):
--                                 its place in line and, built by Go, the start of the lock
--                                 value a hand-off would give its person, up to
--                                 "acquiredAtUtc":" (line.lua)

-- peopleKeys returns the presence keys of the entity whose lock key is k.
local function peopleKeys(k)
  local rest = string.sub(k, 6) -- after "lock:"
  return 'lockview:' .. rest, 'lockviewer:' .. rest, 'lockline:' .. rest
end

-- serverNow is the Redis server's clock, Unix ms, shifted by shift ms (tests): views run
-- out by one clock whichever instance made them.
local function serverNow(shift)
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + (tonumber(shift) or 0)
end

-- holderOf is the holderOid of the lock value v (a string or false), or nil.
local function holderOf(v)
  if not v then return nil end
  local ok, d = pcall(cjson.decode, v)
  if ok and type(d) == 'table' and type(d['holderOid']) == 'string' then return d['holderOid'] end
  return nil
end

-- people works out the viewers of an entity: one entry per oid, the earliest since of its
-- sockets whose view is live, ordered by since (then oid), each with its state and, when
-- waiting, its position. holder is the oid holding the lock, or nil. A person waits when
-- one of their live sockets views with intent edit and someone else holds the lock; the
-- line is ordered by the earliest "waiting since" of those sockets (then oid). Entries
-- without a live view, and line entries without one, are dropped. When the list differs
-- from the one announced last it is announced (cmd, channel, head: the feed's command,
-- channel and the message up to the list) with a new version. line may be nil (no
-- intent kept).
-- read, when given, is what the caller read of the views and the line already, as
-- {vs = ZRANGE WITHSCORES of views, ln = HGETALL of line}, unchanged since.
-- Returns the list's JSON, its version, and the live sockets of the line as
-- {socket, waiting since, oid, head} ordered by waiting since.
local function people(views, viewers, line, holder, now, margin, cmd, channel, head, read)
  read = read or {}
  local vs = read.vs or redis.call('ZRANGE', views, 0, -1, 'WITHSCORES') -- by expiry: the last is the latest
  local live = {}
  for i = 1, #vs, 2 do live[vs[i]] = true end

  local waiting = {} -- oid -> earliest waiting since of a live socket with intent edit
  local queue = {}
  local ln = read.ln or {}
  if line and not read.ln then ln = redis.call('HGETALL', line) end
  for i = 1, #ln, 2 do
    local at, oid, lh = string.match(ln[i + 1], '^([^\t]*)\t([^\t]*)\t(.*)$')
    if at and live[ln[i]] then
      at = tonumber(at) or 0
      queue[#queue + 1] = {ln[i], at, oid, lh}
      if waiting[oid] == nil or at < waiting[oid] then waiting[oid] = at end
    else
      redis.call('HDEL', line, ln[i])
    end
  end
  table.sort(queue, function(a, b)
    if a[2] ~= b[2] then return a[2] < b[2] end
    return a[1] < b[1]
  end)

  local first = {} -- oid -> {since, json, oid}
  local entries = redis.call('HGETALL', viewers)
  for i = 1, #entries, 2 do
    local field = entries[i]
    if field ~= 'viewers' and field ~= 'version' then
      local oid, since, json = string.match(entries[i + 1], '^([^\t]*)\t([^\t]*)\t(.*)$')
      if oid and live[field] then
        since = tonumber(since) or 0
        local f = first[oid]
        if f == nil or since < f[1] then first[oid] = {since, json, oid} end
      else
        redis.call('HDEL', viewers, field)
      end
    end
  end

  -- The line: the people waiting, by when they started.
  local inLine = {}
  if holder ~= nil then
    for oid, at in pairs(waiting) do
      if oid ~= holder and first[oid] ~= nil then inLine[#inLine + 1] = {at, oid} end
    end
  end
  table.sort(inLine, function(a, b)
    if a[1] ~= b[1] then return a[1] < b[1] end
    return a[2] < b[2]
  end)
  local position = {}
  for i, p in ipairs(inLine) do position[p[2]] = i end

  local list = {}
  for _, f in pairs(first) do list[#list + 1] = f end
  table.sort(list, function(a, b)
    if a[1] ~= b[1] then return a[1] < b[1] end
    return a[3] < b[3]
  end)
  local parts = {}
  for i, p in ipairs(list) do
    local state = '"looking"'
    if p[3] == holder then
      state = '"editing"'
    elseif position[p[3]] then
      state = '"waiting","position":' .. position[p[3]]
    end
    -- the stored JSON is an object Go encoded: add the state before its closing brace
    parts[i] = string.sub(p[2], 1, -2) .. ',"state":' .. state .. '}'
  end
  local json = '[' .. table.concat(parts, ',') .. ']'

  -- Each announced list has a version, greater than every one before it for the entity:
  -- the last plus one, or now in µs when that is more (the keys were gone), so that a
  -- receiver can drop a list older than one it already has.
  local last, version = '[]', 0
  for i = 1, #entries, 2 do
    if entries[i] == 'viewers' then last = entries[i + 1] end
    if entries[i] == 'version' then version = tonumber(entries[i + 1]) or 0 end
  end
  if json ~= last then version = math.max(version + 1, now * 1000) end
  if #list == 0 then
    -- Views of sockets whose entry is gone go too: their hubs find them missing.
    redis.call('DEL', views, viewers)
    if line then redis.call('DEL', line) end
  else
    if json ~= last then
      redis.call('HSET', viewers, 'viewers', json, 'version', string.format('%.0f', version))
    end
    local ttl = tonumber(vs[#vs]) - now + tonumber(margin)
    redis.call('PEXPIRE', views, ttl)
    redis.call('PEXPIRE', viewers, ttl)
    if line and #queue > 0 then redis.call('PEXPIRE', line, ttl) end
  end
  if json ~= last and cmd ~= '' then
    redis.call(cmd, channel, head .. json .. '}\n' .. string.format('%.0f', version))
  end
  return json, string.format('%.0f', version), queue
end
