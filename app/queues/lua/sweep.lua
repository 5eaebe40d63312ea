-- The slow queue sweeper's steps around writing a blob to the database (seed 002, app/sweeper), each atomic:
-- 'begin' marks the queue as being swept (new requests go to its rear from now on) and returns what to move: of
--   the front list, its last `max` entries beyond the first `keep` (the buffer stays in memory); of the rear list,
--   its first `max`. A digest of those entries and their metadata is kept with the mark.
-- 'commit' moves them out of memory, their blobs joining the chain in order (at its head for a part of the front, at
--   its tail for a part of the rear), only if nothing touched them meanwhile: the same entries at the same end of the
--   same list, each with the same metadata (not selected, deleted or changed). Otherwise the sweep is aborted and
--   the queue is left as it was.
-- 'abort' ends a sweep that could not write its blob.
-- KEYS: req, payload, front, rear, chain, swept, sweeping, fence
-- ARGV: mode, queue name, token, scheduler epoch, then for begin: part ('front' or 'rear'), keep, max;
--       for commit: the blob ids in queue order (none when every entry was of a deleted request: nothing to keep)
-- Returns begin: {0, then per entry: id, meta ('' for a deleted request's entry), payload}; commit: {0, moved} or
-- {-16} aborted; abort: {0}; any: {-12, epoch} when a newer scheduler acted on this queue.
local k = {req = KEYS[1], payload = KEYS[2], front = KEYS[3], rear = KEYS[4], chain = KEYS[5], swept = KEYS[6],
  sweeping = KEYS[7], fence = KEYS[8]}
local mode, queue, token = ARGV[1], ARGV[2], ARGV[3]

local newer = fenced_by(k.fence, tonumber(ARGV[4]))
if newer then return {-12, newer} end

local function digest(ids, metas)
  local parts = {}
  for i, id in ipairs(ids) do
    parts[#parts + 1] = id
    parts[#parts + 1] = metas[i] or ''
  end
  return redis.sha1hex(table.concat(parts, '\n'))
end

-- HMGET of any number of fields (Lua's unpack takes a few thousand at most).
local function hmget(key, fields)
  local values = {}
  for first = 1, #fields, 1000 do
    local chunk = redis.call('HMGET', key, unpack(fields, first, math.min(first + 999, #fields)))
    for i = 1, #chunk do values[first + i - 1] = chunk[i] end
  end
  return values
end

local function entries(part, count)
  if part == 'front' then return redis.call('LRANGE', k.front, -count, -1) end
  return redis.call('LRANGE', k.rear, 0, count - 1)
end

if mode == 'begin' then
  local part, keep, max = ARGV[5], tonumber(ARGV[6]), tonumber(ARGV[7])
  local count
  if part == 'front' then
    count = math.min(max, redis.call('LLEN', k.front) - keep)
  else
    count = math.min(max, redis.call('LLEN', k.rear))
  end
  if count <= 0 then
    redis.call('HDEL', k.sweeping, queue)
    return {0}
  end
  local ids = entries(part, count)
  local metas = hmget(k.req, ids)
  local payloads = hmget(k.payload, ids)
  redis.call('HSET', k.sweeping, queue, table.concat({token, part, count, digest(ids, metas)}, '|'))
  local result = {0}
  for i, id in ipairs(ids) do
    result[#result + 1] = id
    result[#result + 1] = metas[i] or ''
    result[#result + 1] = payloads[i] or ''
  end
  return result
end

local mark = redis.call('HGET', k.sweeping, queue)
local mine = mark and string.sub(mark, 1, #token + 1) == token .. '|'
if mode == 'abort' then
  if mine then redis.call('HDEL', k.sweeping, queue) end
  return {0}
end

-- commit
if not mine then return {-16} end
redis.call('HDEL', k.sweeping, queue)
local _, _, part, count, expected = string.find(mark, '^[^|]*|([^|]*)|([^|]*)|(.*)$')
count = tonumber(count)
local ids = entries(part, count)
if #ids ~= count then return {-16} end
local metas = hmget(k.req, ids)
if digest(ids, metas) ~= expected then return {-16} end

local moved = 0
for i, id in ipairs(ids) do
  if metas[i] then
    redis.call('HDEL', k.req, id)
    redis.call('HDEL', k.payload, id)
    moved = moved + 1
  end
end
if part == 'front' then
  redis.call('LTRIM', k.front, 0, -count - 1)
  for i = #ARGV, 5, -1 do redis.call('LPUSH', k.chain, ARGV[i]) end
else
  redis.call('LTRIM', k.rear, count, -1)
  for i = 5, #ARGV do redis.call('RPUSH', k.chain, ARGV[i]) end
end
if moved > 0 then redis.call('HINCRBY', k.swept, queue, moved) end
return {0, moved}
