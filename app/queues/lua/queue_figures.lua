-- Read only: what /metrics shows of one environment on one node, in one call. Per service class, when its oldest
-- queued request in memory was inserted (what an operator scales and alerts on: how long work has waited). A
-- queue's oldest is the first live entry of its front list (entries of deleted requests stay there until a select
-- skips them), else of its rear, which joins the front when the front runs out; dependent and independent queues
-- both count. A queue whose front is in the database (swept) has older requests there: its oldest in memory is
-- returned, and `swept` says so.
-- KEYS: req, swept, servers, inflight, depth, desired, performance, dead_at, leases, histograms, promotion; per
--       class: dep_front, dep_rear, ind_front, ind_rear
-- ARGV: per class: dep_queue, ind_queue
-- INCLUDES: base
-- Per class, its dependent and independent queue names as `swept` names them.
-- Returns {OK, now, servers registered, requests held, dead letters, depth (HGETALL), desired (HGETALL),
-- performance (HVALS), requests held per class (class, count pairs), histograms (HGETALL), promotion (HGETALL: the
-- bucket and the promoted selects per class, starved_class in includes/promotion.lua), then per class: inserted ms of its oldest
-- (false: none queued in memory), swept (1 or 0)}.
local SCAN = 32  -- entries looked at per list: beyond them, a run of deleted entries is taken for an empty list
local k = {req = KEYS[1], swept = KEYS[2], servers = KEYS[3], inflight = KEYS[4], depth = KEYS[5], desired = KEYS[6],
  performance = KEYS[7], dead_at = KEYS[8], leases = KEYS[9], histograms = KEYS[10], promotion = KEYS[11]}
local FIRST_LIST = 12

local held = 0
for _, count in ipairs(redis.call('HVALS', k.inflight)) do held = held + tonumber(count) end
local result = {OK, now_ms(), redis.call('HLEN', k.servers), held, redis.call('ZCARD', k.dead_at), redis.call('HGETALL', k.depth),
  redis.call('HGETALL', k.desired), redis.call('HVALS', k.performance)}

-- Requests held per class: every selected or begun request has a lease (a read of what is in flight, not of queues).
local per_class, held_by_class = {}, {}
local leased = redis.call('ZRANGE', k.leases, 0, -1)
for first = 1, #leased, 1000 do
  local ids = {unpack(leased, first, math.min(first + 999, #leased))}
  for _, raw in ipairs(redis.call('HMGET', k.req, unpack(ids))) do
    if raw then
      local class = cjson.decode(raw).sc
      per_class[class] = (per_class[class] or 0) + 1
    end
  end
end
for class, count in pairs(per_class) do append_pair(held_by_class, class, count) end
result[#result + 1] = held_by_class
result[#result + 1] = redis.call('HGETALL', k.histograms)
result[#result + 1] = redis.call('HGETALL', k.promotion)

local function first_live(list)
  local ids = redis.call('LRANGE', list, 0, SCAN - 1)
  if #ids == 0 then return nil end
  local raws = redis.call('HMGET', k.req, unpack(ids))
  for i = 1, #ids do
    if raws[i] then
      local meta = cjson.decode(raws[i])
      if meta.state == 'q' then return meta.inserted end
    end
  end
  return nil
end

for class = 0, #ARGV / 2 - 1 do
  local oldest, swept = nil, 0
  for half = 0, 1 do
    local front = FIRST_LIST + 4 * class + 2 * half
    local inserted = first_live(KEYS[front]) or first_live(KEYS[front + 1])
    if inserted and (oldest == nil or inserted < oldest) then oldest = inserted end
    if redis.call('HEXISTS', k.swept, ARGV[2 * class + half + 1]) == 1 then swept = 1 end
  end
  result[#result + 1] = oldest or false
  result[#result + 1] = swept
end
return result
