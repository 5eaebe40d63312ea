-- The end of a request's life, and its dead letter.
-- INCLUDES: tombstones

-- The end of a request's life: its work record goes to the outbox (flushed to Parquet by the service), the
-- queue manager's exit is scheduled when the service (not a server) ended it, and a tombstone lets a late
-- caller be told "already ended" instead of "unknown" (with its queue manager, who may ask how it ended, status.lua;
-- includes/tombstones.lua). With `later` (a table from ending_later), its writes are
-- gathered there for `written` to make with one command each: the caller then reads nothing they change until
-- then (end_held read its requests first, and answers an id it ended twice itself).
-- `raw`, if given, is the metadata as stored (a JSON object cjson wrote, which `meta` decodes), without the end's keys
-- (outcome, ended, id, result, error) but for the result and error `meta` was given since: the record is then that
-- text with the end's keys appended, rather than `meta` encoded again, which took a batched lifecycle's end some
-- 8 % of Redis's CPU, most of it formatting numbers. The same members either way; only their order differs.
-- `field`, given with `later`, is the id's tombstone field as the service computed it (app/queues/tombstones.py):
-- made here, in Lua, it cost a batched end about a fifth of Redis's CPU time.
local function finish(k, id, meta, outcome, now, tombstone_ms, later, raw, field)
  local spliced = raw and #raw > 2 and string.sub(raw, -1) == '}' and meta.outcome == nil and meta.ended == nil and meta.id == nil
  meta.outcome = outcome
  meta.ended = now
  meta.id = id
  local record
  if spliced then
    local tail = {string.sub(raw, 1, -2), ',"outcome":', cjson.encode(outcome), ',"ended":', string.format('%d', now), ',"id":',
      cjson.encode(id)}
    for _, key in ipairs({'result', 'error'}) do
      if meta[key] ~= nil then
        tail[#tail + 1] = ',"' .. key .. '":'
        tail[#tail + 1] = cjson.encode(meta[key])
      end
    end
    tail[#tail + 1] = '}'
    record = table.concat(tail)
  else
    record = cjson.encode(meta)
  end
  if outcome == 'deleted' or outcome == 'purged' or outcome == 'abandoned' then
    if meta.exit and meta.exit ~= '' then
      redis.call('ZADD', k.exits, now, cjson.encode({id = id, qm = meta.qm, exit = meta.exit, attempt = 0, record = record}))
    end
  end
  if later then
    later.records[#later.records + 1] = record
    later.gone[#later.gone + 1] = id
    append_pair(later.done, field or tombstone_field(id), outcome)
    later.done[#later.done + 1] = meta.qm or ''
  else
    redis.call('HDEL', k.req, id)
    write_tombstones(k, now, tombstone_ms, {tombstone_field(id), outcome, meta.qm or ''})
    redis.call('RPUSH', k.records, record)
    redis.call('HDEL', k.payload, id)
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

-- `done`: per request ended, its tombstone field, outcome and queue manager (write_tombstones).
local function ending_later()
  return {records = {}, gone = {}, done = {}, leases = {}, samples = {}}
end

local function written(k, later, now, tombstone_ms)
  if #later.records == 0 then return end
  in_chunks('HDEL', k.req, later.gone)
  write_tombstones(k, now, tombstone_ms, later.done)
  in_chunks('RPUSH', k.records, later.records)
  in_chunks('HDEL', k.payload, later.gone)
  in_chunks('ZREM', k.leases, later.leases)
  in_chunks('ZADD', k.samples, later.samples)
end
