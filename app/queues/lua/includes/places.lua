-- A request's place in its queue: how many requests are ahead of one, without walking its queue (status.lua).
-- INCLUDES: base
--
-- Each queued request has a place (its metadata's `place`, kept while it is swept): one past the queue's last at its
-- back (the queue's count in the hash KEYS places, field: the queue's name), one before where the queue begins at
-- its front. So along a queue (its front list, its swept part, its rear list: docs/sweeper.md) places count up one
-- by one, and each place from where the queue begins to a request's is a request queued there or a hole: a request
-- removed where it stood (deleted or purged while queued), kept as the member `<queue>|<place>|<id>` of the zset
-- KEYS holes (all of score 0, read by name range). The requests ahead of one are the difference of the places less
-- the holes between: a few reads, however long the queue. Where the swept part begins is kept too (places field
-- `<queue>|chain`), for when the front list is empty. Holes before where the queue begins are stale: forgotten when a
-- request is put at the front (it takes the place before) and by the lease duty's pass (reassign_expired.lua).
-- A request queued before places were given has none: its queue's figures are unknown (nil) until it has left.

-- Places are written with 16 digits, from this offset up: a place below 1 (put at the front of a queue that began
-- at 1) sorts as the number it is.
local PLACE_OFFSET = 1e15
-- Entries a reader looks at for a list's first queued request (as queue_figures.lua): beyond them, a run of entries of
-- removed requests makes where the queue begins unknown until a select drops them.
local PLACE_SCAN = 32
local NOTHING_QUEUED = 'nothing queued'

local function place_name(queue, place)
  return queue .. '|' .. string.format('%016d', place + PLACE_OFFSET)
end

local function queue_of(meta)
  return meta.sc .. ':' .. (meta.dep and 'dep' or 'ind')
end

-- A queued request removed where it stood (remove_queued in finish.lua) leaves a hole at its place.
local function leave_hole(holes_key, id, meta)
  if meta.place then
    redis.call('ZADD', holes_key, 0, place_name(queue_of(meta), meta.place) .. '|' .. id)
  end
end

-- The holes of `queue` at places from `from` up to (not with) `to`.
local function holes_between(holes_key, queue, from, to)
  return redis.call('ZLEXCOUNT', holes_key, '[' .. place_name(queue, from), '(' .. place_name(queue, to))
end

local function forget_holes_before(holes_key, queue, place)
  redis.call('ZREMRANGEBYLEX', holes_key, '[' .. queue .. '|', '(' .. place_name(queue, place))
end

-- A reader's look for the first queued request of a list: its metadata; nil when there is none among the first
-- PLACE_SCAN entries, and true beside it when entries beyond them were not looked at.
local function first_queued(k, list)
  local ids = redis.call('LRANGE', list, 0, PLACE_SCAN - 1)
  if #ids == 0 then return nil, false end
  local raws = redis.call('HMGET', k.req, unpack(ids))
  for i = 1, #ids do
    if raws[i] then
      local meta = cjson.decode(raws[i])
      if meta.state == 'q' then return meta end
    end
  end
  return nil, #ids == PLACE_SCAN
end

-- A writer's: the entries of removed requests at the list's head are dropped on the way, as a select drops them.
local function queued_head(k, list)
  while true do
    local id = redis.call('LINDEX', list, 0)
    if not id then return nil, false end
    local meta = load_meta(k.req, id)
    if meta and meta.state == 'q' then return meta end
    redis.call('LPOP', list)
  end
end

-- Where a queue begins: the place of its first queued request, or of its swept part when its front list holds none;
-- NOTHING_QUEUED; nil when not known. `first` is first_queued or queued_head. k needs req, swept, places.
local function queue_start(k, queue, front, rear, first)
  local meta, more = first(k, front)
  if meta then return meta.place end
  if more then return nil end
  if redis.call('HEXISTS', k.swept, queue) == 1 then
    return tonumber(redis.call('HGET', k.places, queue .. '|chain'))
  end
  meta, more = first(k, rear)
  if meta then return meta.place end
  if more then return nil end
  return NOTHING_QUEUED
end

-- The last of `count` places at the back of `queue` (inserts and retries at the back).
local function back_places(k, queue, count)
  return redis.call('HINCRBY', k.places, queue, count)
end

-- The place of a request put at the front of `queue` (given back, or a dead letter retried at the front): the one
-- before where the queue begins, or at its back when nothing is queued; the holes before it are forgotten (its place
-- may have been one's). nil when where the queue begins is not known. k needs req, swept, places, holes.
local function front_place(k, queue, front, rear)
  local start = queue_start(k, queue, front, rear, queued_head)
  if start == nil then return nil end
  local place = start == NOTHING_QUEUED and back_places(k, queue, 1) or start - 1
  forget_holes_before(k.holes, queue, place + 1)
  return place
end

-- How many requests are queued ahead of the one at `place` in `queue`; nil when not known.
local function ahead_of(k, queue, front, rear, place)
  local start = queue_start(k, queue, front, rear, first_queued)
  if start == nil or start == NOTHING_QUEUED or place < start then return nil end
  return place - start - holes_between(k.holes, queue, start, place)
end

-- How many requests `queue` holds (in memory and swept); nil when not known.
local function queued_in(k, queue, front, rear)
  local start = queue_start(k, queue, front, rear, first_queued)
  if start == NOTHING_QUEUED then return 0 end
  local last = tonumber(redis.call('HGET', k.places, queue))
  if start == nil or last == nil or last < start then return nil end
  return last + 1 - start - holes_between(k.holes, queue, start, last + 1)
end

-- The stale holes of `queue` forgotten: those before where it begins (all of them when nothing is queued).
local function forget_stale_holes(k, queue, front, rear)
  local start = queue_start(k, queue, front, rear, first_queued)
  if start == NOTHING_QUEUED then
    redis.call('ZREMRANGEBYLEX', k.holes, '[' .. queue .. '|', '(' .. queue .. '}')
  elseif start then
    forget_holes_before(k.holes, queue, start)
  end
end

-- Where a queue's swept part begins, set as a sweep or a blob's return changes its head (nil: not known).
local function set_chain_start(k, queue, place)
  if place then
    redis.call('HSET', k.places, queue .. '|chain', place)
  else
    redis.call('HDEL', k.places, queue .. '|chain')
  end
end
