-- Held requests given back to their queues (reassign_expired.lua, reassign_server.lua).
-- INCLUDES: finish, wake

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

