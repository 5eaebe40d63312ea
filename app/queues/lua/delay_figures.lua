-- Read only: what the elected scheduler's delay samples (app/scheduler/duties/delay_sampling.py) need of one
-- environment on one node, in one call: its servers (registered, their worker tasks, the requests they hold, the
-- servers wanted), requests queued per class, requests held per class period, and per class how many of its queued
-- requests wait to be delivered again. A request given back goes to the front of its queue (includes/give_back.lua),
-- so those are the ones at the head of its front lists: counted up to the first queued request never delivered, over
-- at most `scan` entries per list. Requests held per class period are counted in a random sample of at most
-- `held_sample` of them, scaled to them all: each sample's cost is bounded however many are held (every one when
-- no more are held).
-- KEYS: req, servers, inflight, desired, depth, leases; per class: dep_front, ind_front
-- ARGV: scan, held_sample; per class: class, period_ends
-- period_ends: where each of the class's periods but the last ends, in ms since insert, comma-separated ('' for one).
-- INCLUDES: base, servers
-- Returns {OK, now, servers registered, their worker tasks, requests held, servers wanted, depth (HGETALL), requests
-- held per class period ('<class>|<period>', count pairs, scaled from the sample), then per class: its queued requests
-- redelivered}.
local k = {req = KEYS[1], servers = KEYS[2], inflight = KEYS[3], desired = KEYS[4], depth = KEYS[5], leases = KEYS[6]}
local FIRST_LIST = 7
local CHUNK_IDS = 16
local scan, held_sample = tonumber(ARGV[1]), tonumber(ARGV[2])
local FIRST_CLASS = 3
local class_count = (#ARGV - FIRST_CLASS + 1) / 2
local now = now_ms()

local servers, tasks, held = servers_and_held(k)

local ends = {}
for i = 0, class_count - 1 do
  local bounds = {}
  for bound in string.gmatch(ARGV[FIRST_CLASS + 1 + 2 * i], '%d+') do bounds[#bounds + 1] = tonumber(bound) end
  ends[ARGV[FIRST_CLASS + 2 * i]] = bounds
end

-- Every held request has a lease; its period is the one its time since insert is in (period_number). ZRANDMEMBER
-- with a positive count gives distinct leases, all of them when there are no more than it asks for.
local per_period, held_by_period = {}, {}
local sampled = redis.call('ZRANDMEMBER', k.leases, held_sample)
local scale = #sampled > 0 and redis.call('ZCARD', k.leases) / #sampled or 1
for first = 1, #sampled, CHUNK do
  for _, raw in ipairs(redis.call('HMGET', k.req, unpack(sampled, first, math.min(first + CHUNK - 1, #sampled)))) do
    if raw then
      local meta = cjson.decode(raw)
      local bounds = ends[meta.sc]
      if bounds then
        local period, age = 1, now - meta.inserted
        while period <= #bounds and age >= bounds[period] do period = period + 1 end
        local field = meta.sc .. '|' .. period
        per_period[field] = (per_period[field] or 0) + 1
      end
    end
  end
end
for field, count in pairs(per_period) do append_pair(held_by_period, field, math.floor(count * scale + 0.5)) end

local function redelivered_at_head(list)
  local count = 0
  for first = 0, scan - 1, CHUNK_IDS do
    local ids = redis.call('LRANGE', list, first, math.min(first + CHUNK_IDS, scan) - 1)
    if #ids == 0 then return count end
    local raws = redis.call('HMGET', k.req, unpack(ids))
    for i = 1, #ids do
      if raws[i] then
        local meta = cjson.decode(raws[i])
        if meta.state == 'q' then
          if (meta.deliveries or 0) == 0 then return count end
          count = count + 1
        end
      end
    end
  end
  return count
end

local result = {OK, now, servers, tasks, held, tonumber(redis.call('HGET', k.desired, '*')) or 0, redis.call('HGETALL', k.depth),
  held_by_period}
for class = 0, class_count - 1 do
  result[#result + 1] = redelivered_at_head(KEYS[FIRST_LIST + 2 * class]) + redelivered_at_head(KEYS[FIRST_LIST + 2 * class + 1])
end
return result
