-- Shared by every script (prepended when the scripts are loaded, after the return codes of app/queues/codes.py as
-- Lua locals: OK, UNKNOWN_WORK, ...). Keys follow app/queues/keys.py.
--
-- A request's metadata is one JSON object in the hash KEYS req (field: request id); its payload lives apart in
-- KEYS payload so that state changes never copy it. States: q (queued), s (selected), b (begun).

-- Enough ended requests to judge a service class on; at high rates the window is in effect the last MAX_SAMPLES.
local MAX_SAMPLES = 10000

-- The one clock is Redis's: every instant of a request's life and of a lease is read here, inside the script that
-- acts on it, so neither a caller's clock (replicas on other hosts) nor the delay before its call orders anything.
local function now_ms()
  local time = redis.call('TIME')
  return tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
end

-- A variadic command (HSET, RPUSH, ZADD ...) on `key` with `values`, in chunks that Lua's stack takes (an even
-- size, so that field-value pairs stay together).
local CHUNK = 1000
local function in_chunks(command, key, values)
  for first = 1, #values, CHUNK do
    redis.call(command, key, unpack(values, first, math.min(first + CHUNK - 1, #values)))
  end
end

local function append_pair(list, a, b)
  list[#list + 1] = a
  list[#list + 1] = b
end

-- Long-polling servers that found nothing wait listed in KEYS waiters (a sorted set of `<process>:<waiter>`,
-- best first: non-overflow before overflow, higher worker weight first, then the least recently served: round robin
-- among equals), so that new work wakes the servers it is for in the process that holds them, and no other process
-- runs a select for nothing. `served_at`: when the server was last given work (ms; 0 for never).
local function wake_rank(server, served_at)
  local rank = (server.overflow and 1001 or 0) + 1000 - (server.weight or 1)
  return rank + (served_at % 1e9) / 1e9  -- (it wraps every 11 days: a moment's unfairness)
end

-- Wakes up to `count` servers for new work of `channel`'s environment and node: the best listed waiters, through
-- their processes' channels (`wake_prefix` .. process). The share of a process no longer listening goes to `channel`,
-- which every process hears (and wakes its best free waiter for). Work beyond the listed waiters wakes nobody: a
-- long poll that found nothing is listed by the same script call, so every server waiting for work is listed (a
-- server busy at capacity, or selecting now, takes its next work when it next selects).
local function wake(waiters_key, channel, wake_prefix, count)
  local listed = redis.call('ZPOPMIN', waiters_key, count)
  local per_process, processes = {}, {}
  for i = 1, #listed, 2 do
    local process, waiter = string.match(listed[i], '^(.+):([^:]+)$')
    if per_process[process] == nil then
      per_process[process] = {}
      processes[#processes + 1] = process
    end
    table.insert(per_process[process], waiter)
  end
  local unwoken = 0
  for _, process in ipairs(processes) do
    local waiters = per_process[process]
    if redis.call('PUBLISH', wake_prefix .. process, table.concat(waiters, ' ') .. '\n' .. channel) == 0 then
      unwoken = unwoken + #waiters
    end
  end
  if unwoken > 0 then
    redis.call('PUBLISH', channel, unwoken)
  end
end

local function load_meta(req_key, id)
  local raw = redis.call('HGET', req_key, id)
  if not raw then return nil end
  return cjson.decode(raw)
end

local function save_meta(req_key, id, meta)
  redis.call('HSET', req_key, id, cjson.encode(meta))
end

-- The end of a request's life: its work record goes to the outbox (flushed to Parquet by the service), the
-- queue manager's exit is scheduled when the service (not a server) ended it, and a tombstone lets a late
-- caller be told "already ended" instead of "unknown". With `later` (a table from ending_later), its writes are
-- gathered there for `written` to make with one command each: the caller then reads nothing they change until
-- then (end_held read its requests first, and answers an id it ended twice itself).
local function finish(k, id, meta, outcome, now, tombstone_ms, later)
  meta.outcome = outcome
  meta.ended = now
  meta.id = id
  local record = cjson.encode(meta)
  if outcome == 'deleted' or outcome == 'purged' or outcome == 'abandoned' then
    if meta.exit and meta.exit ~= '' then
      redis.call('ZADD', k.exits, now, cjson.encode({id = id, qm = meta.qm, exit = meta.exit, attempt = 0, record = record}))
    end
  end
  if later then
    later.records[#later.records + 1] = record
    later.gone[#later.gone + 1] = id
    append_pair(later.done, id, outcome)
    append_pair(later.expiry, now + tombstone_ms, id)
  else
    redis.call('HDEL', k.req, id)
    redis.call('HSET', k.done, id, outcome)
    redis.call('RPUSH', k.records, record)
    redis.call('HDEL', k.payload, id)
    redis.call('ZADD', k.done_exp, now + tombstone_ms, id)
  end
  return record
end

-- Dead letters (app/queues/dead_letters.py): a request abandoned after its last delivery, or ended `failed` by a
-- server that asked for it, is kept with its payload (JSON text, as inserted) under its id in the hash KEYS dead,
-- and by when in the zset dead_at, for an operator to look at, retry or discard. Each one written drops up to
-- DEAD_TRIM of those older than `keep_ms`, so the set stays bounded by a week's dead letters and no duty is needed.
local DEAD_TRIM = 100
local function dead_letter(k, id, meta, payload, reason, now, keep_ms)
  local letter = {meta = meta, payload = payload or 'null', reason = reason}
  redis.call('HSET', k.dead, id, cjson.encode(letter))
  redis.call('ZADD', k.dead_at, now, id)
  local old = redis.call('ZRANGEBYSCORE', k.dead_at, '-inf', now - keep_ms, 'LIMIT', 0, DEAD_TRIM)
  if #old > 0 then
    redis.call('HDEL', k.dead, unpack(old))
    redis.call('ZREM', k.dead_at, unpack(old))
  end
end

local function ending_later()
  return {records = {}, gone = {}, done = {}, expiry = {}, leases = {}, samples = {}}
end

local function written(k, later)
  if #later.records == 0 then return end
  in_chunks('HDEL', k.req, later.gone)
  in_chunks('HSET', k.done, later.done)
  in_chunks('RPUSH', k.records, later.records)
  in_chunks('HDEL', k.payload, later.gone)
  in_chunks('ZADD', k.done_exp, later.expiry)
  in_chunks('ZREM', k.leases, later.leases)
  in_chunks('ZADD', k.samples, later.samples)
end

-- Fencing: a scheduler's duty (epoch > 0) acts on a queue only with an epoch at least the highest that did here.
-- Returns the newer epoch that refuses this one, or nil (and records this epoch when it is the newest).
local function fenced_by(fence_key, epoch)
  if epoch <= 0 then return nil end
  local highest = tonumber(redis.call('GET', fence_key) or 0)
  if epoch < highest then return highest end
  if epoch > highest then redis.call('SET', fence_key, epoch) end
  return nil
end

-- An id that is not (or no longer) in the request hash: ended earlier (tombstone) or never existed.
local function missing(k, id)
  local outcome = redis.call('HGET', k.done, id)
  if outcome then return {ALREADY_ENDED, outcome} end
  return {UNKNOWN_WORK}
end

-- Histograms (app/health/metrics.py): each ended request counted in its class period's report buckets, for its
-- response, queue and execution times, with their sums, in the hash k.histograms. A class's periods (duration and
-- goal response time, ms) are in k.buckets (app.policy.active.bucket_specs, published by the scheduler); a time is
-- in the first bucket whose limit (BUCKET_LIMITS_PCT of the goal, from the prelude) it does not pass, else the 14th.
-- A class with no spec there, or a period without a response time goal, is not counted. Returns
-- `count(class, response, queue, execution)` and `write()`, which makes one HINCRBY per field counted.
local TIME_KINDS = {'r', 'q', 'e'}
local function histograms(k)
  local specs, counts = {}, {}
  local function spec_of(class)
    if specs[class] == nil then
      local raw, spec = redis.call('HGET', k.buckets, class), false
      if raw then
        spec = {}
        for duration, goal in string.gmatch(raw, '([^|;]*)|([^;]*)') do
          spec[#spec + 1] = {duration = tonumber(duration), goal = tonumber(goal)}
        end
      end
      specs[class] = spec
    end
    return specs[class]
  end
  local function count(class, response, queue, execution)
    local spec = spec_of(class)
    if not spec or #spec == 0 then return end
    -- The period as app.policy.active.period_number finds it: it moves on when a period's duration is used up.
    local number, boundary = #spec, 0
    for i, period in ipairs(spec) do
      if period.duration == nil then number = i break end
      boundary = boundary + period.duration
      if response < boundary then number = i break end
    end
    local goal = spec[number].goal
    if not goal then return end
    local values = {response, queue, execution}
    for n, kind in ipairs(TIME_KINDS) do
      local percent, bucket = values[n] * 100 / goal, #BUCKET_LIMITS_PCT + 1
      for i, limit in ipairs(BUCKET_LIMITS_PCT) do
        if percent <= limit then bucket = i break end
      end
      local prefix = class .. '|' .. number .. '|' .. kind .. '|'
      counts[prefix .. bucket] = (counts[prefix .. bucket] or 0) + 1
      counts[prefix .. 'sum'] = (counts[prefix .. 'sum'] or 0) + values[n]
    end
  end
  local function write()
    for field, n in pairs(counts) do redis.call('HINCRBY', k.histograms, field, n) end
  end
  return count, write
end

-- A server ends requests it holds (IWM4STEN), each judged on its own: one that can no longer be ended (its lease
-- expired and it went to another server, or it already ended) does not stop the others. The ends are ARGV runs of
-- END_ARITY (id, outcome, result JSON or '', error text or '', '1' to dead-letter a failed request or '') from index
-- `first` to `last`; per request, a code and a value are appended to `result`: OK and the work record, UNKNOWN_WORK
-- and '', ALREADY_ENDED and the outcome, NOT_HOLDER and ''.
-- Each end is also a sample for goal evaluation: 'class|response ms|queue ms|execution ms|id' in the zset
-- k.samples, scored by its end; samples older than `samples_ms`, and all but the newest MAX_SAMPLES, are dropped
-- here, so the set stays bounded whether or not anyone evaluates it (and an evaluation reads at most that many).
-- Each end is counted in its class period's histograms too (`histograms`).
-- k needs req, payload, leases, inflight, records, exits, done, done_exp, samples, dead, dead_at, buckets, histograms.
local END_ARITY = 5
local function end_held(k, server, now, tombstone_ms, samples_ms, dead_keep_ms, first, last, result)
  local ended, later, ids = 0, ending_later(), {}
  local count, write_histograms = histograms(k)
  for i = first, last, END_ARITY do ids[#ids + 1] = ARGV[i] end
  local raws = #ids > 0 and redis.call('HMGET', k.req, unpack(ids)) or {}
  -- Requests ended by this call (read before it ended any): an id given twice is told the second time that it ended.
  local ended_here = {}
  for n, id in ipairs(ids) do
    local i = first + END_ARITY * (n - 1)
    local meta = raws[n] and cjson.decode(raws[n])
    if ended_here[id] then
      result[#result + 1] = ALREADY_ENDED
      result[#result + 1] = ended_here[id]
    elseif not meta then
      local gone = missing(k, id)
      result[#result + 1] = gone[1]
      result[#result + 1] = gone[2] or ''
    elseif meta.state == 'q' or meta.server ~= server then
      result[#result + 1] = NOT_HOLDER
      result[#result + 1] = ''
    else
      local outcome = ARGV[i + 1]
      later.leases[#later.leases + 1] = id
      if ARGV[i + 2] ~= '' then meta.result = ARGV[i + 2] end
      if ARGV[i + 3] ~= '' then meta.error = ARGV[i + 3] end
      result[#result + 1] = OK
      result[#result + 1] = finish(k, id, meta, outcome, now, tombstone_ms, later)
      if ARGV[i + 4] == '1' and outcome == 'failed' then
        dead_letter(k, id, meta, redis.call('HGET', k.payload, id), 'failed', now, dead_keep_ms)
      end
      ended_here[id] = outcome
      local selected = meta.selected or now
      append_pair(later.samples, now, table.concat({meta.sc, now - meta.inserted, selected - meta.inserted, now - selected, id}, '|'))
      count(meta.sc, now - meta.inserted, selected - meta.inserted, now - selected)
      ended = ended + 1
    end
  end
  written(k, later)
  write_histograms()
  if ended > 0 then
    redis.call('HINCRBY', k.inflight, server, -ended)
    redis.call('ZREMRANGEBYSCORE', k.samples, '-inf', now - samples_ms)
    redis.call('ZREMRANGEBYRANK', k.samples, 0, -MAX_SAMPLES - 1)
  end
end

-- A queued request (in memory or swept) is deleted or purged: its entry in a list stays until a select or sweep drops
-- it (deleting from a list's middle is O(n)). k needs req, payload, depth, records, exits, done, done_exp.
local function remove_queued(k, id, meta, outcome, now, tombstone_ms)
  redis.call('HINCRBY', k.depth, meta.sc, -1)
  return finish(k, id, meta, outcome, now, tombstone_ms)
end

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
    if group == 0 or slots_left[group] > 0 then
      local inserted = nil
      for part, kind in ipairs({'dep', 'ind'}) do
        local base = first_list + 4 * position + 2 * (part - 1)
        local queue = ARGV[first_class + position] .. ':' .. kind
        local head = queue_head(k, queue, KEYS[base], KEYS[base + 1])
        if head == false then return nil, queue end
        if head and (inserted == nil or head.inserted < inserted) then inserted = head.inserted end
      end
      if inserted and first_with_work == nil then
        first_with_work = position
      elseif inserted and inserted + after_ms > now then
        bucket.due = math.min(bucket.due, inserted + after_ms)
      elseif inserted and (oldest == nil or inserted < oldest) then
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

-- Select work for a server (select.lua, select_and_begin.lua), after ending what it asks to end (IWM4STEN) in the
-- same call: the most important class first, its home class (the one the manager gave it, if any) first among
-- equals; dependent before independent, FIFO within; ahead of them, a request past the promotion time
-- (starved_class). `begin_now`: the selected requests are begun at once (IWM4STBG).
-- KEYS and ARGV as select.lua describes them.
local function select_work(begin_now)
  local k = {req = KEYS[1], payload = KEYS[2], depth = KEYS[3], leases = KEYS[4], inflight = KEYS[5], servers = KEYS[6],
    seen = KEYS[7], records = KEYS[8], exits = KEYS[9], done = KEYS[10], done_exp = KEYS[11], samples = KEYS[12],
    assign = KEYS[13], retire = KEYS[14], swept = KEYS[15], served = KEYS[16], waiters = KEYS[17], served_at = KEYS[18],
    dead = KEYS[19], dead_at = KEYS[20], buckets = KEYS[21], histograms = KEYS[22], promotion = KEYS[23]}
  local FIRST_LIST = 24
  local now, server, lease_ms, max_items = now_ms(), ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
  local waiter, promotion_ms, promotion_share, ends = ARGV[7], tonumber(ARGV[8]), tonumber(ARGV[9]), tonumber(ARGV[10])
  local first_class = 11 + END_ARITY * ends

  local result = {OK, ends}
  end_held(k, server, now, tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6]), 11, first_class - 1, result)

  -- A long-polling server's waiter (ARGV 7; '' when the server does not wait) is listed when it is to wait for
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
  local class_count = (#KEYS - FIRST_LIST + 1) / 4
  local first_tier = first_class + class_count
  local classes, home = {}, redis.call('HGET', k.assign, server)
  local tier_start = 1
  for i = 0, class_count - 1 do
    if i > 0 and ARGV[first_tier + i] ~= ARGV[first_tier + i - 1] then tier_start = i + 1 end
    if ARGV[first_class + i] == home then table.insert(classes, tier_start, i) else classes[#classes + 1] = i end
  end
  -- Resource groups (app/queues/resource_groups.py), when the environment's classes are in some: after the tiers,
  -- per class its group's number (0: none), then per group the slots it granted this select.
  local group_of, slots_left = {}, {}
  local first_group = first_tier + class_count
  if ARGV[first_group] then
    for i = 0, class_count - 1 do group_of[i] = tonumber(ARGV[first_group + i]) end
    for g = 1, #ARGV - first_group - class_count + 1 do slots_left[g] = tonumber(ARGV[first_group + class_count + g - 1]) end
  end

  -- Takes up to `want - got` requests from the front of one queue; the rear joins the front when the front is empty
  -- and nothing of the queue is in the database. Returns false when the queue's next requests are in the database.
  -- The requests are popped, read, written and given their payloads a command each for all of them.
  local function take(class, queue, front, rear, limit, promoted)
    local blocked, metas, leases, ids, slots = false, {}, {}, {}, {}
    while got < limit do
      local popped = redis.call('LPOP', front, limit - got)
      if not popped then
        if redis.call('HEXISTS', k.swept, queue) == 1 then
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
            append_pair(leases, now + lease_ms, id)
            ids[#ids + 1] = id
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

  -- Takes from one class, dependent before independent, until `got` reaches `limit`; returns the queue whose next
  -- requests are in the database, if it stopped there.
  local function take_class(position, limit, promoted)
    local class = ARGV[first_class + position]
    local group = group_of[position] or 0
    -- A class whose group granted no slot (at its cap) is passed over for the next eligible work.
    if group > 0 then limit = math.min(limit, got + slots_left[group]) end
    for part, kind in ipairs({'dep', 'ind'}) do
      local base = FIRST_LIST + 4 * position + 2 * (part - 1)
      local queue = class .. ':' .. kind
      local before = got
      local open = got < limit and take(class, queue, KEYS[base], KEYS[base + 1], limit, promoted)
      if group > 0 then slots_left[group] = slots_left[group] - (got - before) end
      if got < limit and not open then return queue end
    end
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
  listing(got == 0)
  return result
end

-- Give held requests back (reassign_expired.lua, reassign_server.lua): of `ids`, those of a class the call knows
-- (and held by `holder`, unless nil) go to the front of their class queue, or are abandoned once delivered max
-- deliveries times (and dead-lettered). KEYS and ARGV as those scripts describe them. Returns {OK, requeued, abandoned, ids of abandoned...}.
local function give_back(k, ids, holder, now)
  local max_deliveries, tombstone_ms = tonumber(ARGV[1]), tonumber(ARGV[2])
  local channel, wake_prefix, dead_keep_ms = ARGV[3], ARGV[4], tonumber(ARGV[7])
  local lists = {}
  for i = 8, #ARGV do
    local base = 16 + 2 * (i - 8)
    lists[ARGV[i]] = {KEYS[base + 1], KEYS[base + 2]}
  end

  -- Newest first, so that pushing each to the front leaves them in their original order.
  local taken = {}
  for _, id in ipairs(ids) do
    local meta = load_meta(k.req, id)
    if not meta then
      redis.call('ZREM', k.leases, id)
    elseif (holder == nil or meta.server == holder) and lists[meta.sc] then
      taken[#taken + 1] = {id = id, meta = meta}
    end
  end
  table.sort(taken, function(a, b) return a.meta.seq > b.meta.seq end)

  local requeued, abandoned, result = 0, 0, {}
  for _, entry in ipairs(taken) do
    local id, meta = entry.id, entry.meta
    redis.call('ZREM', k.leases, id)
    redis.call('HINCRBY', k.inflight, meta.server, -1)
    if meta.deliveries >= max_deliveries then
      local payload = redis.call('HGET', k.payload, id)
      finish(k, id, meta, 'abandoned', now, tombstone_ms)
      dead_letter(k, id, meta, payload, 'max_deliveries', now, dead_keep_ms)
      abandoned = abandoned + 1
      result[#result + 1] = id
    else
      meta.state = 'q'
      meta.server = nil
      meta.selected = nil
      meta.begun = nil
      save_meta(k.req, id, meta)
      redis.call('LPUSH', lists[meta.sc][meta.dep and 1 or 2], id)
      redis.call('HINCRBY', k.depth, meta.sc, 1)
      requeued = requeued + 1
    end
  end
  if requeued > 0 then
    wake(k.waiters, channel, wake_prefix, requeued)
  end
  table.insert(result, 1, abandoned)
  table.insert(result, 1, requeued)
  table.insert(result, 1, OK)
  return result
end

-- The slow queue sweeper's steps (sweep_begin.lua, sweep_commit.lua, sweep_abort.lua) share these.
local function sweep_keys()
  return {req = KEYS[1], payload = KEYS[2], front = KEYS[3], rear = KEYS[4], chain = KEYS[5], swept = KEYS[6],
    sweeping = KEYS[7], fence = KEYS[8]}
end

-- A digest of entries and their metadata: a sweep commits only entries nothing touched since it began.
local function sweep_digest(ids, metas)
  local parts = {}
  for i, id in ipairs(ids) do
    parts[#parts + 1] = id
    parts[#parts + 1] = metas[i] or ''
  end
  return redis.sha1hex(table.concat(parts, '\n'))
end

-- HMGET of any number of fields (Lua's unpack takes a few thousand at most).
local function hmget_all(key, fields)
  local values = {}
  for first = 1, #fields, 1000 do
    local chunk = redis.call('HMGET', key, unpack(fields, first, math.min(first + 999, #fields)))
    for i = 1, #chunk do values[first + i - 1] = chunk[i] end
  end
  return values
end

-- What a sweep moves: the last `count` of the front list, or the first `count` of the rear list.
local function sweep_entries(k, part, count)
  if part == 'front' then return redis.call('LRANGE', k.front, -count, -1) end
  return redis.call('LRANGE', k.rear, 0, count - 1)
end

-- The mark of the queue's sweep if it is the one of `token` (begun by this sweeper), else nil.
local function own_sweep_mark(k, queue, token)
  local mark = redis.call('HGET', k.sweeping, queue)
  if mark and string.sub(mark, 1, #token + 1) == token .. '|' then return mark end
  return nil
end

-- Resource groups (group_take.lua, group_settle.lua): the time a group's work waited on its cap ends here.
local function uncapped(capped_key, now)
  local since = redis.call('HGET', capped_key, 'since')
  if since then
    redis.call('HINCRBY', capped_key, 'total_ms', now - tonumber(since))
    redis.call('HDEL', capped_key, 'since')
  end
end
