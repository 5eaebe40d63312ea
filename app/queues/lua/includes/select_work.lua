-- Select work for a server (select.lua, select_and_begin.lua), after ending what it asks to end (IWM4STEN) in the
-- same call: the most important class first, its home class (the one the manager gave it, if any) first among
-- equals; dependent before independent, FIFO within; ahead of them, a request past the promotion time
-- (starved_class). `begin_now`: the selected requests are begun at once (IWM4STBG). `grouped`: the classes' resource
-- groups are taken and settled in this call (select_grouped.lua), not before and after it.
-- KEYS and ARGV as select.lua's and select_grouped.lua's headers name them.
-- INCLUDES: end_held, wake, promotion, groups
local function select_work(begin_now, grouped)
  local k = {req = KEYS[1], payload = KEYS[2], depth = KEYS[3], leases = KEYS[4], inflight = KEYS[5], servers = KEYS[6],
    seen = KEYS[7], records = KEYS[8], exits = KEYS[9], done = KEYS[10], tombs = {KEYS[11], KEYS[12], KEYS[13], KEYS[14]},
    samples = KEYS[15], assign = KEYS[16], retire = KEYS[17], swept = KEYS[18], served = KEYS[19], waiters = KEYS[20],
    served_at = KEYS[21], dead = KEYS[22], dead_at = KEYS[23], buckets = KEYS[24], histograms = KEYS[25], promotion = KEYS[26]}
  local FIRST_LIST = 27
  local now, server, lease_ms, max_items = now_ms(), ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
  local waiter, promotion_ms, promotion_share, ends = ARGV[7], tonumber(ARGV[8]), tonumber(ARGV[9]), tonumber(ARGV[10])
  local group_count = grouped and tonumber(ARGV[11]) or 0
  local first_end = grouped and 14 or 11
  local first_class = first_end + END_ARITY * ends
  local class_count = (#KEYS - FIRST_LIST + 1) / 4 - group_count
  local first_tier = first_class + class_count
  -- Resource groups, when the environment's classes are in some: after the tiers, per class its group's number
  -- (0: none), then per group the slots it granted this select (app/queues/resource_groups.py), or, `grouped`, its
  -- max_in_flight: this call grants them (includes/groups.lua), after its ends freed theirs.
  local first_group = first_tier + class_count
  local group_of, slots_left, places, ended_one = {}, {}, {}, nil
  if grouped then
    places = group_places(FIRST_LIST + 4 * class_count, group_count, first_group + class_count)
    ended_one = releasing(places, ARGV[12], first_class, first_group, class_count)
  end
  if ARGV[first_group] then
    for i = 0, class_count - 1 do group_of[i] = tonumber(ARGV[first_group + i]) end
    for g = 1, grouped and 0 or #ARGV - first_group - class_count + 1 do
      slots_left[g] = tonumber(ARGV[first_group + class_count + g - 1])
    end
  end

  -- result[3]: the groups (their numbers, comma-separated) whose work the select left for lack of slots.
  local result = {OK, ends, ''}
  local short = {}
  end_held(k, server, now, tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6]), first_end, first_class - 1, result, ended_one)
  release_ended(places)
  -- Each group's slots after the select: held by what it took, its ends' freed (a group the select neither asked nor
  -- freed a slot of is left as it is), and the select listed where it left the group's work for lack of slots. The
  -- rest of its grant was never taken from anyone: only the ends' slots and those of lapsed reservations the grant
  -- dropped are freed for the places the cap refused.
  local function settle_groups()
    for g, place in ipairs(places) do
      if place.asked or place.released > 0 then
        settled(place, place.released + (place.lapsed or 0), nil, now, nil, short[g] and ARGV[13])
      end
    end
    local numbers = {}
    for g in pairs(short) do numbers[#numbers + 1] = g end
    table.sort(numbers)
    result[3] = table.concat(numbers, ',')
  end

  -- A long-polling server's `waiter` ('' when the server does not wait) is listed when it is to wait for
  -- work (nothing selected, or an overflow server not needed yet), and unlisted otherwise.
  local me
  local function listing(waits)
    if waiter == '' then return end
    if waits then
      local served_at = tonumber(redis.call('HGET', k.served_at, server) or '0')
      redis.call('ZADD', k.waiters, 'NX', wake_rank(me, served_at), waiter)
    else
      redis.call('ZREM', k.waiters, waiter)
    end
  end

  local function refuse(status, ...)
    settle_groups()
    listing(status == OVERFLOW_NOT_NEEDED)
    result[1] = status
    for _, value in ipairs({...}) do result[#result + 1] = value end
    return result
  end

  local raw = redis.call('HGET', k.servers, server)
  if not raw then return refuse(SERVER_NOT_REGISTERED) end
  redis.call('HSET', k.seen, server, now)  -- a selecting server is alive
  if redis.call('SISMEMBER', k.retire, server) == 1 then return refuse(SERVER_SURPLUS) end
  me = cjson.decode(raw)
  local inflight = tonumber(redis.call('HGET', k.inflight, server) or '0')
  if inflight >= me.tasks then return refuse(WORKER_TASKS_EXHAUSTED, inflight, me.tasks) end

  if me.overflow then
    local all = redis.call('HGETALL', k.servers)
    for i = 1, #all, 2 do
      local other = cjson.decode(all[i + 1])
      if not other.overflow and tonumber(redis.call('HGET', k.inflight, all[i]) or '0') < other.tasks then
        return refuse(OVERFLOW_NOT_NEEDED)
      end
    end
  end

  local want = math.min(me.tasks - inflight, max_items)
  local got = 0
  -- Class positions (0-based) in the order to look at them: the order given (most important first), except that the
  -- server's home class comes first among the classes of its tier (the ARGV after the names: equal tiers are
  -- adjacent). A home never puts a class before a more important one: docs/scheduler.md, "Which work a server takes".
  local classes, home = {}, redis.call('HGET', k.assign, server)
  local tier_start = 1
  for i = 0, class_count - 1 do
    if i > 0 and ARGV[first_tier + i] ~= ARGV[first_tier + i - 1] then tier_start = i + 1 end
    if ARGV[first_class + i] == home then table.insert(classes, tier_start, i) else classes[#classes + 1] = i end
  end
  if grouped then
    -- A group grants its slots when the select first looks at one of its classes, for what the server still wants
    -- (take_class and starved_class reach a class's group only when the class has work, or a swept front to bring back).
    setmetatable(slots_left, {__index = function(left, g)
      local place = places[g]
      place.granted, place.asked = grant(place, want - got, now), true
      left[g] = place.granted
      return place.granted
    end})
  end

  -- Whether this part of a queue goes on in the database (its blob to come back first): looked up only where the
  -- environment has anything swept, which it reads once per call.
  local any_swept = nil
  local function swept_part(queue)
    if any_swept == nil then any_swept = redis.call('HLEN', k.swept) > 0 end
    return any_swept and redis.call('HEXISTS', k.swept, queue) == 1
  end

  -- Takes up to `want - got` requests from the front of one queue; the rear joins the front when the front is empty
  -- and nothing of the queue is in the database. Returns false when the queue's next requests are in the database.
  -- The requests are popped, read, written and given their payloads a command each for all of them.
  local function take(class, queue, front, rear, limit, promoted, hold)
    local blocked, metas, leases, ids, slots = false, {}, {}, {}, {}
    -- A score as text, formatted once: a number would be formatted (%.17g) for each request.
    local lease_end = string.format('%d', now + lease_ms)
    while got < limit do
      local popped = redis.call('LPOP', front, limit - got)
      if not popped then
        if swept_part(queue) then
          blocked = true
          break
        end
        if redis.call('EXISTS', rear) == 0 then break end
        redis.call('RENAME', rear, front)
      else
        local raws = redis.call('HMGET', k.req, unpack(popped))
        for j, id in ipairs(popped) do
          local meta = raws[j] and cjson.decode(raws[j])
          -- Entries of deleted requests stay in the list (deleting from its middle is O(n)); they are skipped here.
          if meta and meta.state == 'q' then
            meta.state = 's'
            meta.server = server
            meta.selected = now
            meta.deliveries = (meta.deliveries or 0) + 1
            meta.promoted = promoted or nil  -- of this delivery: an earlier one's mark goes
            if begin_now then
              meta.state = 'b'
              meta.begun = now
            end
            local encoded = cjson.encode(meta)
            append_pair(metas, id, encoded)
            append_pair(leases, lease_end, id)
            ids[#ids + 1] = id
            if hold then hold[#hold + 1] = group_member(ARGV[12], id, meta) end
            result[#result + 1] = id
            result[#result + 1] = encoded
            result[#result + 1] = false  -- its payload, read below
            slots[#slots + 1] = #result
            got = got + 1
          end
        end
      end
    end
    if #ids > 0 then
      in_chunks('HSET', k.req, metas)
      in_chunks('ZADD', k.leases, leases)
      local payloads = redis.call('HMGET', k.payload, unpack(ids))
      for j, slot in ipairs(slots) do result[slot] = payloads[j] end
      redis.call('HINCRBY', k.depth, class, -#ids)
      redis.call('HINCRBY', k.served, queue, #ids)
    end
    return not blocked
  end

  -- Whether a class may have work: one of its lists exists (an empty list is no key; one may hold only deleted
  -- requests), or one of its queues goes on in the database. One command rather than a pop and two lookups per queue.
  local function has_work(first, class)
    return redis.call('EXISTS', KEYS[first], KEYS[first + 1], KEYS[first + 2], KEYS[first + 3]) > 0
      or swept_part(class .. ':dep') or swept_part(class .. ':ind')
  end

  -- Takes from one class, dependent before independent, until `got` reaches `limit`; returns the queue whose next
  -- requests are in the database, if it stopped there.
  local function take_class(position, limit, promoted)
    local class = ARGV[first_class + position]
    local first = FIRST_LIST + 4 * position
    -- A class with nothing to take is passed over, and its group not asked for a slot: a select that found nothing
    -- asked every group of the environment.
    if not has_work(first, class) then return nil end
    local group = group_of[position] or 0
    -- A class whose group granted no slot (at its cap) is passed over for the next eligible work; where the group's
    -- slots ran out before its work did, the select is listed to be woken when one is freed (settled).
    local capped = false
    if group > 0 and got + slots_left[group] < limit then limit, capped = got + slots_left[group], true end
    local hold = places[group] and places[group].hold
    for part, kind in ipairs({'dep', 'ind'}) do
      local base = first + 2 * (part - 1)
      local queue = class .. ':' .. kind
      local before = got
      local open = got < limit and take(class, queue, KEYS[base], KEYS[base + 1], limit, promoted, hold)
      if group > 0 then slots_left[group] = slots_left[group] - (got - before) end
      if got < limit and not open then return queue end
    end
    if capped and got >= limit and has_work(first, class) then short[group] = true end
    return nil
  end

  local blocked = nil
  local bucket = promotion_bucket(k.promotion)
  local starved, swept = starved_class(k, bucket, classes, FIRST_LIST, first_class, group_of, slots_left, now, promotion_ms)
  if swept then return refuse(FRONT_SWEPT, swept) end
  if starved then
    blocked = take_class(starved, 1, true)
    if got > 0 then count_promotion(k.promotion, bucket, ARGV[first_class + starved]) end
  end
  for _, position in ipairs(classes) do
    if got >= want or blocked then break end
    blocked = take_class(position, want, false)
  end
  refill(k.promotion, bucket, promotion_share, got)
  if blocked and got == 0 then return refuse(FRONT_SWEPT, blocked) end
  if got > 0 then
    redis.call('HINCRBY', k.inflight, server, got)
    redis.call('HSET', k.served_at, server, now)
  end
  settle_groups()
  listing(got == 0)
  return result
end

