-- Read only: a request's own status (GET /v1/work/{token}, app/queues/request_status.py) in one call: its metadata
-- (queued or held, or as a dead letter) or its tombstone; while it is queued, how many requests of its class queue
-- are ahead of it (its class's dependent ones first: includes/places.lua), and what its environment's servers hold.
-- KEYS: req, done, done_0, done_1, done_2, done_3, dead, swept, places, holes, servers, inflight, desired,
--       performance, leases; per class: dep_front, dep_rear, ind_front, ind_rear
-- ARGV: id, swept_meta; per class: class; per class: tier
-- INCLUDES: places, servers, tombstones
-- swept_meta: '', or the request's metadata as the blob of its swept queue keeps it (read from the database after a
-- first call found it nowhere here): it is queued there unless memory, a dead letter or a tombstone says otherwise.
-- Returns {UNKNOWN_WORK, 1 when a queue here is swept else 0}; {OK, 'ended', now, tombstone}; {OK, 'dead', now,
-- metadata, reason}; or {OK, 'live' (in memory) or 'swept', now, metadata, requests ahead (false: not known, or not
-- queued), servers registered, their worker tasks, requests held, servers wanted, then (while queued and no worker task
-- is free) 1 when they hold work of a class of equal or higher importance (tier at most its own) else 0, 1 when of
-- a less important class else 0, then the environment's goal evaluation (JSON per class period)}.
local k = {req = KEYS[1], done = KEYS[2], tombs = {KEYS[3], KEYS[4], KEYS[5], KEYS[6]}, dead = KEYS[7], swept = KEYS[8],
  places = KEYS[9], holes = KEYS[10], servers = KEYS[11], inflight = KEYS[12], desired = KEYS[13], performance = KEYS[14],
  leases = KEYS[15]}
local FIRST_LIST = 16
local FIRST_CLASS = 3
local id, swept_meta = ARGV[1], ARGV[2]
local class_count = (#ARGV - 2) / 2
local now = now_ms()

local kind, raw = 'live', redis.call('HGET', k.req, id)
if not raw then
  local letter = redis.call('HGET', k.dead, id)
  if letter then
    letter = cjson.decode(letter)
    return {OK, 'dead', now, cjson.encode(letter.meta), letter.reason}
  end
  local tombstone = tombstone_of(k, id)
  if tombstone then return {OK, 'ended', now, tombstone} end
  if swept_meta == '' then return {UNKNOWN_WORK, redis.call('HLEN', k.swept) > 0 and 1 or 0} end
  kind, raw = 'swept', swept_meta
end
local meta = cjson.decode(raw)
local queued = meta.state == 'q'

local position, tier_of = nil, {}
for i = 0, class_count - 1 do
  local class = ARGV[FIRST_CLASS + i]
  tier_of[class] = tonumber(ARGV[FIRST_CLASS + class_count + i])
  if class == meta.sc then position = i end
end

local ahead = nil
if queued and meta.place and position then
  local base = FIRST_LIST + 4 * position
  if meta.dep then
    ahead = ahead_of(k, meta.sc .. ':dep', KEYS[base], KEYS[base + 1], meta.place)
  else
    ahead = ahead_of(k, meta.sc .. ':ind', KEYS[base + 2], KEYS[base + 3], meta.place)
    local dependent = ahead and queued_in(k, meta.sc .. ':dep', KEYS[base], KEYS[base + 1])
    ahead = dependent and ahead + dependent
  end
end

local servers, tasks, held = servers_and_held(k)

-- What the servers hold, looked at only when it matters (its class's tier known, no task free), and only until work
-- of equal or higher importance is found.
local higher, lower = 0, 0
local mine = tier_of[meta.sc]
if queued and mine and tasks > 0 and held >= tasks then
  local leased = redis.call('ZRANGE', k.leases, 0, -1)
  for first = 1, #leased, 100 do
    local raws = redis.call('HMGET', k.req, unpack(leased, first, math.min(first + 99, #leased)))
    for i = 1, #raws do
      local tier = raws[i] and tier_of[cjson.decode(raws[i]).sc]
      if tier and tier <= mine then higher = 1 elseif tier then lower = 1 end
    end
    if higher == 1 then break end
  end
end

local result = {OK, kind, now, raw, ahead or false, servers, tasks, held, tonumber(redis.call('HGET', k.desired, '*')) or 0, higher, lower}
for _, period in ipairs(redis.call('HVALS', k.performance)) do result[#result + 1] = period end
return result
