-- A server ends the requests it holds (end.lua, and select_work before it selects), each a sample and a count in
-- its class period's histograms.
-- INCLUDES: finish

-- Enough ended requests to judge a service class on; at high rates the window is in effect the last MAX_SAMPLES.
local MAX_SAMPLES = 10000

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
  -- A class period's field names per kind (`class|period|kind|bucket`, and `...|sum`), each made at its first use in
  -- a call rather than concatenated (its numbers formatted) twice per time counted.
  local names = {}
  local function names_of(class, number)
    names[class] = names[class] or {}
    local of = names[class][number]
    if of == nil then
      of = {}
      for n, kind in ipairs(TIME_KINDS) do
        local prefix = class .. '|' .. number .. '|' .. kind .. '|'
        of[n] = {prefix = prefix, sum = prefix .. 'sum'}
      end
      names[class][number] = of
    end
    return of
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
    local values, kinds = {response, queue, execution}, names_of(class, number)
    for n in ipairs(TIME_KINDS) do
      local percent, bucket = values[n] * 100 / goal, #BUCKET_LIMITS_PCT + 1
      for i, limit in ipairs(BUCKET_LIMITS_PCT) do
        if percent <= limit then bucket = i break end
      end
      local kind_names = kinds[n]
      local field = kind_names[bucket]
      if field == nil then
        field = kind_names.prefix .. bucket
        kind_names[bucket] = field
      end
      local sum = kind_names.sum
      counts[field] = (counts[field] or 0) + 1
      counts[sum] = (counts[sum] or 0) + values[n]
    end
  end
  local function write()
    for field, n in pairs(counts) do redis.call('HINCRBY', k.histograms, field, n) end
  end
  return count, write
end

-- A server ends requests it holds (IWM4STEN), each judged on its own: one that can no longer be ended (its lease
-- expired and it went to another server, or it already ended) does not stop the others. The ends are ARGV runs of
-- END_ARITY (id, outcome, result JSON or '', error text or '', '1' to dead-letter a failed request or '', the life
-- its token names, its tombstone's field: app/queues/tombstones.py) from index `first` to `last`; per request, a code
-- and a value are appended to `result`: OK and the work record, UNKNOWN_WORK and '', ALREADY_ENDED and the outcome
-- ('' for an earlier life's end: that life ended, and a dead letter retried lives again under the same id),
-- NOT_HOLDER and ''.
-- Each end is also a sample for goal evaluation: 'class|response ms|queue ms|execution ms|id' in the zset
-- k.samples, scored by its end; samples older than `samples_ms`, and all but the newest MAX_SAMPLES, are dropped
-- here, so the set stays bounded whether or not anyone evaluates it (and an evaluation reads at most that many).
-- Each end is counted in its class period's histograms too (`histograms`).
-- k needs req, payload, leases, inflight, records, exits, done, tombs, samples, dead, dead_at, buckets, histograms.
-- `ended_one`, if given, is called with each request ended and its metadata (its resource group's slot: releasing
-- in includes/groups.lua).
local END_ARITY = 7
local function end_held(k, server, now, tombstone_ms, samples_ms, dead_keep_ms, first, last, result, ended_one)
  local ended, later, ids, now_text = 0, ending_later(), {}, string.format('%d', now)
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
    elseif (meta.life or 1) ~= tonumber(ARGV[i + 5]) then
      result[#result + 1] = (meta.life or 1) > tonumber(ARGV[i + 5]) and ALREADY_ENDED or UNKNOWN_WORK
      result[#result + 1] = ''
    elseif meta.state == 'q' or meta.server ~= server then
      result[#result + 1] = NOT_HOLDER
      result[#result + 1] = ''
    else
      local outcome = ARGV[i + 1]
      later.leases[#later.leases + 1] = id
      -- The stored text, for finish to append the end's keys to, unless it has some of them already.
      local stored = meta.result == nil and meta.error == nil and raws[n] or nil
      if ARGV[i + 2] ~= '' then meta.result = ARGV[i + 2] end
      if ARGV[i + 3] ~= '' then meta.error = ARGV[i + 3] end
      result[#result + 1] = OK
      result[#result + 1] = finish(k, id, meta, outcome, now, tombstone_ms, later, stored, ARGV[i + 6])
      if ARGV[i + 4] == '1' and outcome == 'failed' then
        dead_letter(k, id, meta, redis.call('HGET', k.payload, id), 'failed', now, dead_keep_ms)
      end
      ended_here[id] = outcome
      local selected = meta.selected or now
      -- %d, not tostring's %.14g: the same text for these whole numbers, at a fraction of the cost.
      append_pair(later.samples, now_text, string.format('%s|%d|%d|%d|%s', meta.sc, now - meta.inserted, selected - meta.inserted,
        now - selected, id))
      count(meta.sc, now - meta.inserted, selected - meta.inserted, now - selected)
      if ended_one then ended_one(id, meta) end
      ended = ended + 1
    end
  end
  written(k, later, now, tombstone_ms)
  write_histograms()
  if ended > 0 then
    redis.call('HINCRBY', k.inflight, server, -ended)
    redis.call('ZREMRANGEBYSCORE', k.samples, '-inf', now - samples_ms)
    redis.call('ZREMRANGEBYRANK', k.samples, 0, -MAX_SAMPLES - 1)
  end
end

