-- Shared by every script (prepended when the scripts are loaded). Keys and return codes follow app/queues.
--
-- A request's metadata is one JSON object in the hash KEYS req (field: request id); its payload lives apart in
-- KEYS payload so that state changes never copy it. States: q (queued), s (selected), b (begun).

local function now_ms()
  return tonumber(ARGV[1])
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

-- An id that is not (or no longer) in the request hash: ended earlier (tombstone) or never existed.
local function missing(k, id)
  local outcome = redis.call('HGET', k.done, id)
  if outcome then return {-5, outcome} end
  return {-1}
end
