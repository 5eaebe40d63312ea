-- The slow queue sweeper's steps (sweep_begin.lua, sweep_commit.lua, sweep_abort.lua) share these.
-- INCLUDES: base

local function sweep_keys()
  return {req = KEYS[1], payload = KEYS[2], front = KEYS[3], rear = KEYS[4], chain = KEYS[5], swept = KEYS[6],
    sweeping = KEYS[7], fence = KEYS[8], places = KEYS[9]}
end

-- A digest of entries and their metadata: a sweep commits only entries nothing touched since it began.
local function sweep_digest(ids, metas)
  local parts = {}
  for i, id in ipairs(ids) do
    parts[#parts + 1] = id
    parts[#parts + 1] = metas[i] or ''
  end
  return redis.sha1hex(table.concat(parts, '\n'))
end

-- HMGET of any number of fields (Lua's unpack takes a few thousand at most).
local function hmget_all(key, fields)
  local values = {}
  for first = 1, #fields, 1000 do
    local chunk = redis.call('HMGET', key, unpack(fields, first, math.min(first + 999, #fields)))
    for i = 1, #chunk do values[first + i - 1] = chunk[i] end
  end
  return values
end

-- What a sweep moves: the last `count` of the front list, or the first `count` of the rear list.
local function sweep_entries(k, part, count)
  if part == 'front' then return redis.call('LRANGE', k.front, -count, -1) end
  return redis.call('LRANGE', k.rear, 0, count - 1)
end

-- The mark of the queue's sweep if it is the one of `token` (begun by this sweeper), else nil.
local function own_sweep_mark(k, queue, token)
  local mark = redis.call('HGET', k.sweeping, queue)
  if mark and string.sub(mark, 1, #token + 1) == token .. '|' then return mark end
  return nil
end

