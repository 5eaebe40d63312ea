-- The slow queue sweeper (app/sweeper, after TPF MQSeries') begins to sweep a queue, before it writes a blob to the database:
-- the queue is marked as being swept (new requests go to its rear from now on) and what to move is returned: of
-- the front list, its last `max` entries beyond the first `keep` (the buffer stays in memory); of the rear list,
-- its first `max`. A digest of those entries and their metadata is kept with the mark (see sweep_commit.lua).
-- KEYS: req, payload, front, rear, chain, swept, sweeping, fence, places
-- ARGV: queue, token, epoch, part, keep, max
-- INCLUDES: sweep
-- part: 'front' or 'rear'.
-- Returns {OK, then per entry: id, meta ('' for a deleted request's entry), payload}, or {FENCED, epoch} when a
-- newer scheduler acted on this queue.
local k = sweep_keys()
local queue, token = ARGV[1], ARGV[2]
local newer = fenced_by(k.fence, tonumber(ARGV[3]))
if newer then return {FENCED, newer} end

local part, keep, max = ARGV[4], tonumber(ARGV[5]), tonumber(ARGV[6])
local count
if part == 'front' then
  count = math.min(max, redis.call('LLEN', k.front) - keep)
else
  count = math.min(max, redis.call('LLEN', k.rear))
end
if count <= 0 then
  redis.call('HDEL', k.sweeping, queue)
  return {OK}
end
local ids = sweep_entries(k, part, count)
local metas = hmget_all(k.req, ids)
local payloads = hmget_all(k.payload, ids)
redis.call('HSET', k.sweeping, queue, table.concat({token, part, count, sweep_digest(ids, metas)}, '|'))
local result = {OK}
for i, id in ipairs(ids) do
  result[#result + 1] = id
  result[#result + 1] = metas[i] or ''
  result[#result + 1] = payloads[i] or ''
end
return result
