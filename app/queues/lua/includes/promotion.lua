-- No work starved: a request queued past the promotion time, selected ahead of the class order (select_work).
-- INCLUDES: base

-- No work starved (z/OS blocked workload support; docs/scheduler.md): a request queued longer than the promotion
-- time is selected ahead of the class order, as often as a token bucket per environment and node allows. Each
-- request selected adds `share` of a token, up to 1; a promotion spends one, so over any span promotions stay
-- within 1 + share x selects. The hash KEYS promotion holds `tokens` (absent: 1), `due` (ms; absent: 0) and per
-- class `promoted|<class>`, its promoted selects (/metrics). `due` spares the common select any look at the
-- queues: a look that promotes nothing sets it to when the oldest head it saw passes the promotion time.
local PROMOTED_FIELD = 'promoted|'
-- Tokens add up in binary fractions: 0.1 added ten times is a hair under 1.
local TOKEN_SLACK = 1e-9
-- Entries of deleted requests at a list's head dropped per look (a select drops them too), beyond which the list
-- is taken for empty until the next look.
local HEAD_DROPS = 32

local function promotion_bucket(key)
  local fields = redis.call('HMGET', key, 'tokens', 'due')
  return {tokens = tonumber(fields[1] or 1), due = tonumber(fields[2] or 0), changed = false}
end

local function live_head(k, list)
  for _ = 1, HEAD_DROPS do
    local id = redis.call('LINDEX', list, 0)
    if not id then return nil end
    local meta = load_meta(k.req, id)
    if meta and meta.state == 'q' then return meta end
    redis.call('LPOP', list)
  end
  return nil
end

-- The oldest queued request of one queue, as a select would come to it: the head of its front, else (nothing of
-- the queue in the database) of its rear. nil: none queued in memory; false: its front is empty and the queue goes
-- on in the database, whose blob must come back first.
local function queue_head(k, queue, front, rear)
  local head = live_head(k, front)
  if head or redis.call('LLEN', front) > 0 then return head end
  if redis.call('HEXISTS', k.swept, queue) == 1 then return false end
  return live_head(k, rear)
end

-- The class (its position) to promote, when `bucket` holds a token and is due: of the classes in `classes` order
-- after the first with work (the one this select takes from anyway), skipping those whose resource group granted
-- no slot (at its cap), the one whose oldest head (dependent or independent) passed the promotion time longest
-- ago. Returns nil when none did (`due` set to when the next does), or nil and a queue whose front is empty and
-- goes on in the database (a select brings its blob back first, then looks again).
local function starved_class(k, bucket, classes, first_list, first_class, group_of, slots_left, now, after_ms)
  if bucket.tokens + TOKEN_SLACK < 1 or now < bucket.due then return nil end
  local chosen, oldest, first_with_work = nil, nil, nil
  bucket.changed, bucket.due = true, now + after_ms
  for _, position in ipairs(classes) do
    local group = group_of[position] or 0
    -- Its group is asked for slots only for a class with work (select_work asks lazily): a class whose group has
    -- none left is skipped, and its swept front is not brought back for it.
    local function open() return group == 0 or slots_left[group] > 0 end
    local inserted, swept = nil, nil
    for part, kind in ipairs({'dep', 'ind'}) do
      local base = first_list + 4 * position + 2 * (part - 1)
      local queue = ARGV[first_class + position] .. ':' .. kind
      local head = queue_head(k, queue, KEYS[base], KEYS[base + 1])
      if head == false then
        swept = queue
        break
      end
      if head and (inserted == nil or head.inserted < inserted) then inserted = head.inserted end
    end
    if swept then
      if open() then return nil, swept end
    elseif inserted and open() then
      if first_with_work == nil then
        first_with_work = position
      elseif inserted + after_ms > now then
        bucket.due = math.min(bucket.due, inserted + after_ms)
      elseif oldest == nil or inserted < oldest then
        chosen, oldest = position, inserted
      end
    end
  end
  -- The promoted class may hold more such requests: look again as soon as a token is back.
  if chosen then bucket.due = now end
  return chosen
end

-- A promotion spends a token and is counted for its class.
local function count_promotion(key, bucket, class)
  bucket.tokens = bucket.tokens - 1
  redis.call('HINCRBY', key, PROMOTED_FIELD .. class, 1)
end

-- Each request selected adds `share` of a token, up to 1; the bucket is written only when it changed.
local function refill(key, bucket, share, selected)
  local tokens = math.min(1, bucket.tokens + share * selected)
  if tokens ~= bucket.tokens or bucket.changed then
    redis.call('HSET', key, 'tokens', tokens, 'due', bucket.due)
  end
end

