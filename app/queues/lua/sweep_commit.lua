-- The slow queue sweeper (app/sweeper, after TPF MQSeries') wrote its blobs: the entries sweep_begin.lua returned move out of
-- memory, their blobs joining the chain in order (at its head for a part of the front, at its tail for a part of
-- the rear), only if nothing touched them meanwhile: the same entries at the same end of the same list, each with
-- the same metadata (not selected, deleted or changed). Otherwise the sweep is aborted and the queue left as it was.
-- KEYS: req, payload, front, rear, chain, swept, sweeping, fence, places
-- ARGV: queue, token, epoch; per blob: blob
-- INCLUDES: sweep, places
-- The blob ids in queue order (none when every entry was of a deleted request: nothing to keep).
-- Returns {OK, moved}, {SWEEP_ABORTED}, or {FENCED, epoch} when a newer scheduler acted on this queue.
local FIRST_BLOB = 4
local k = sweep_keys()
local queue, token = ARGV[1], ARGV[2]
local newer = fenced_by(k.fence, tonumber(ARGV[3]))
if newer then return {FENCED, newer} end

local mark = own_sweep_mark(k, queue, token)
if not mark then return {SWEEP_ABORTED} end
redis.call('HDEL', k.sweeping, queue)
local _, _, part, count, expected = string.find(mark, '^[^|]*|([^|]*)|([^|]*)|(.*)$')
count = tonumber(count)
local ids = sweep_entries(k, part, count)
if #ids ~= count then return {SWEEP_ABORTED} end
local metas = hmget_all(k.req, ids)
if sweep_digest(ids, metas) ~= expected then return {SWEEP_ABORTED} end

local moved, first_place = 0, nil
for i, id in ipairs(ids) do
  if metas[i] then
    if moved == 0 then first_place = cjson.decode(metas[i]).place end
    redis.call('HDEL', k.req, id)
    redis.call('HDEL', k.payload, id)
    moved = moved + 1
  end
end
-- Where the swept part begins (includes/places.lua) is its first request's place once it comes first.
local begins_chain = part == 'front' or redis.call('LLEN', k.chain) == 0
if part == 'front' then
  redis.call('LTRIM', k.front, 0, -count - 1)
  for i = #ARGV, FIRST_BLOB, -1 do redis.call('LPUSH', k.chain, ARGV[i]) end
else
  redis.call('LTRIM', k.rear, count, -1)
  for i = FIRST_BLOB, #ARGV do redis.call('RPUSH', k.chain, ARGV[i]) end
end
if moved > 0 then
  redis.call('HINCRBY', k.swept, queue, moved)
  if begins_chain then set_chain_start(k, queue, first_place) end
end
return {OK, moved}
