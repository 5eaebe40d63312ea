-- Queue requests (IWM4QIN), all or none.
-- KEYS: req, payload, depth, classes, places, swept, sweeping, waiters; per queue: front, rear; per item: idempotency
-- ARGV: notify_channel, wake_prefix, idempotency_ttl_s, backlog_limit, queues, metas; per queue: queue, service_class;
--       per meta: meta; per item: id, queue_number, meta_number, payload, idempotency_key
-- INCLUDES: base, wake
-- The queues the items join and their metadata are given once each (`queues` and `metas` of them), and each item
-- names its own by number (from 1): a batch's requests mostly share them, and their text, given per item, was most
-- of a batch's bytes. Per item: idempotency is a dummy key of the same slot when the item has none (idempotency_key
-- ''); a meta is JSON without `place`, `seq` and `inserted`, which are added here; payload is JSON.
-- A queue that is swept, being swept, or still has a rear list takes new requests at its rear (app/sweeper).
-- Returns {OK, id...} in item order (an id of an earlier insert for a repeated idempotency key),
-- or {BACKLOG_LIMIT, class, depth, limit} when a class queue would pass its backlog limit (nothing written).
local k = {req = KEYS[1], payload = KEYS[2], depth = KEYS[3], classes = KEYS[4], places = KEYS[5], swept = KEYS[6],
  sweeping = KEYS[7], waiters = KEYS[8]}
local FIRST_QUEUE_KEY = 9
local FIRST_QUEUE_ARG = 7
local channel, wake_prefix, idem_ttl, limit = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local queue_count, meta_count = tonumber(ARGV[5]), tonumber(ARGV[6])
local queues = {}
for q = 1, queue_count do
  local key, arg = FIRST_QUEUE_KEY + 2 * (q - 1), FIRST_QUEUE_ARG + 2 * (q - 1)
  queues[q] = {name = ARGV[arg], sc = ARGV[arg + 1], front = KEYS[key], rear = KEYS[key + 1]}
end
local first_meta = FIRST_QUEUE_ARG + 2 * queue_count
local first_item_key = FIRST_QUEUE_KEY + 2 * queue_count
local items = {}
for i = first_meta + meta_count, #ARGV, 5 do
  local queue = queues[tonumber(ARGV[i + 1])]
  items[#items + 1] = {id = ARGV[i], sc = queue.sc, meta = ARGV[first_meta + tonumber(ARGV[i + 2]) - 1], payload = ARGV[i + 3],
    idem = ARGV[i + 4], queue = queue.name, front = queue.front, rear = queue.rear, idem_key = KEYS[first_item_key + #items]}
end

local result, new_per_class, new_per_queue, depth_of, fresh = {OK}, {}, {}, {}, {}
for i, item in ipairs(items) do
  local existing = false
  if item.idem ~= '' then
    existing = redis.call('GET', item.idem_key)
  end
  if existing then
    result[#result + 1] = existing
  else
    fresh[i] = true
    new_per_class[item.sc] = (new_per_class[item.sc] or 0) + 1
    new_per_queue[item.queue] = (new_per_queue[item.queue] or 0) + 1
    local depth = depth_of[item.sc]
    if depth == nil then
      depth = tonumber(redis.call('HGET', k.depth, item.sc) or '0')
      depth_of[item.sc] = depth
    end
    if depth + new_per_class[item.sc] > limit then
      return {BACKLOG_LIMIT, item.sc, depth, limit}
    end
    result[#result + 1] = item.id
  end
end

-- Each new request takes the next place at the back of its queue (includes/places.lua): how many are ahead of it
-- is then known without walking the queue, and requests given back return to the front in their order.
-- The writes are gathered and made with one command per key (in chunks): a batch's requests cost Redis a few
-- commands, not nine each.
local now = now_ms()
local next_place = {}
for queue, count in pairs(new_per_queue) do
  next_place[queue] = redis.call('HINCRBY', k.places, queue, count) - count + 1
end
-- lists: per queue, in the order first met, the list its new requests join and their ids.
local metas, payloads, list_of, lists = {}, {}, {}, {}
for i, item in ipairs(items) do
  if fresh[i] then
    local place = next_place[item.queue]
    next_place[item.queue] = place + 1
    -- `seq`, the same number: what a version before places sorts requests given back by (a rolling upgrade).
    local number = string.format('%d', place)
    local stamps = '{"place":' .. number .. ',"seq":' .. number .. ',"inserted":' .. string.format('%d', now) .. ','
    append_pair(metas, item.id, stamps .. string.sub(item.meta, 2))
    append_pair(payloads, item.id, item.payload)
    -- Which list of its queue a request joins is decided once per queue: this script only adds to that list.
    local list = list_of[item.queue]
    if list == nil then
      local swept = redis.call('HEXISTS', k.swept, item.queue) == 1 or redis.call('HEXISTS', k.sweeping, item.queue) == 1
      list = {key = (swept or redis.call('EXISTS', item.rear) == 1) and item.rear or item.front, ids = {}}
      list_of[item.queue] = list
      lists[#lists + 1] = list
    end
    list.ids[#list.ids + 1] = item.id
    if item.idem ~= '' then
      redis.call('SET', item.idem_key, item.id, 'EX', idem_ttl)
    end
  end
end
if #metas > 0 then
  in_chunks('HSET', k.req, metas)
  in_chunks('HSET', k.payload, payloads)
  for _, list in ipairs(lists) do
    in_chunks('RPUSH', list.key, list.ids)
  end
  for sc, added in pairs(new_per_class) do
    redis.call('HINCRBY', k.depth, sc, added)
    redis.call('SADD', k.classes, sc)
  end
  wake(k.waiters, channel, wake_prefix, #metas / 2)
end
return result
