-- Shared by every script (prepended when the scripts are loaded). Keys and return codes follow app/queues.
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
-- caller be told "already ended" instead of "unknown".
local function finish(k, id, meta, outcome, now, tombstone_ms)
  meta.outcome = outcome
  meta.ended = now
  meta.id = id
  local record = cjson.encode(meta)
  redis.call('RPUSH', k.records, record)
  if outcome == 'deleted' or outcome == 'purged' or outcome == 'abandoned' then
    if meta.exit and meta.exit ~= '' then
      redis.call('ZADD', k.exits, now, cjson.encode({id = id, qm = meta.qm, exit = meta.exit, attempt = 0, record = record}))
    end
  end
  redis.call('HDEL', k.req, id)
  redis.call('HDEL', k.payload, id)
  redis.call('HSET', k.done, id, outcome)
  redis.call('ZADD', k.done_exp, now + tombstone_ms, id)
  return record
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
  if outcome then return {-5, outcome} end
  return {-1}
end

-- A server ends requests it holds (IWM4STEN), each judged on its own: one that can no longer be ended (its lease
-- expired and it went to another server, or it already ended) does not stop the others. The ends are ARGV triples
-- (id, outcome, result JSON or '') from index `first` to `last`; per request, a code and a value are appended to
-- `result`: 0 and the work record, -1 and '' (unknown), -5 and the outcome (already ended), -6 and '' (not held).
-- Each end is also a sample for goal evaluation: 'class|response ms|queue ms|execution ms|id' in the zset
-- k.samples, scored by its end; samples older than `samples_ms`, and all but the newest MAX_SAMPLES, are dropped
-- here, so the set stays bounded whether or not anyone evaluates it (and an evaluation reads at most that many).
-- k needs req, payload, leases, inflight, records, exits, done, done_exp, samples.
local function end_held(k, server, now, tombstone_ms, samples_ms, first, last, result)
  local ended = 0
  for i = first, last, 3 do
    local id = ARGV[i]
    local meta = load_meta(k.req, id)
    if not meta then
      local gone = missing(k, id)
      result[#result + 1] = gone[1]
      result[#result + 1] = gone[2] or ''
    elseif meta.state == 'q' or meta.server ~= server then
      result[#result + 1] = -6
      result[#result + 1] = ''
    else
      redis.call('ZREM', k.leases, id)
      if ARGV[i + 2] ~= '' then meta.result = ARGV[i + 2] end
      result[#result + 1] = 0
      result[#result + 1] = finish(k, id, meta, ARGV[i + 1], now, tombstone_ms)
      local selected = meta.selected or now
      redis.call('ZADD', k.samples, now, table.concat({meta.sc, now - meta.inserted, selected - meta.inserted, now - selected, id}, '|'))
      ended = ended + 1
    end
  end
  if ended > 0 then
    redis.call('HINCRBY', k.inflight, server, -ended)
    redis.call('ZREMRANGEBYSCORE', k.samples, '-inf', now - samples_ms)
    redis.call('ZREMRANGEBYRANK', k.samples, 0, -MAX_SAMPLES - 1)
  end
end
