-- Held requests given back to their queues (reassign_expired.lua, reassign_server.lua).
-- INCLUDES: finish, wake, places

-- Give held requests back (reassign_expired.lua, reassign_server.lua): of `ids`, those of a class the call knows
-- (and held by `holder`, unless nil) go to the front of their class queue, or are abandoned once delivered max
-- deliveries times (and dead-lettered). KEYS and ARGV as those scripts describe them. Returns {OK, requeued, abandoned, ids of abandoned...}.
local FIRST_CLASS_QUEUE = 23
local function give_back(k, ids, holder, now)
  local max_deliveries, tombstone_ms = tonumber(ARGV[1]), tonumber(ARGV[2])
  local channel, wake_prefix, dead_keep_ms = ARGV[3], ARGV[4], tonumber(ARGV[7])
  local lists = {}  -- per class: its dependent front and rear, its independent front and rear
  for i = 8, #ARGV do
    local base = FIRST_CLASS_QUEUE + 4 * (i - 8)
    lists[ARGV[i]] = {KEYS[base], KEYS[base + 1], KEYS[base + 2], KEYS[base + 3]}
  end

  -- Newest first (by place, or by the sequence number of a request queued before places were given), so that
  -- pushing each to the front leaves them in their original order.
  local function order(meta) return meta.place or meta.seq or 0 end
  local taken = {}
  for _, id in ipairs(ids) do
    local meta = load_meta(k.req, id)
    if not meta then
      redis.call('ZREM', k.leases, id)
    elseif (holder == nil or meta.server == holder) and lists[meta.sc] then
      taken[#taken + 1] = {id = id, meta = meta}
    end
  end
  table.sort(taken, function(a, b) return order(a.meta) > order(b.meta) end)

  -- Per queue, the place of the request last put at its front here (each next one takes the place before).
  local put_at = {}
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
      local queue = queue_of(meta)
      local front = lists[meta.sc][meta.dep and 1 or 3]
      local place
      if put_at[queue] == nil then
        place = front_place(k, queue, front, lists[meta.sc][meta.dep and 2 or 4])
      else
        place = put_at[queue].place and put_at[queue].place - 1
      end
      put_at[queue] = {place = place}
      meta.state = 'q'
      meta.server = nil
      meta.selected = nil
      meta.begun = nil
      meta.place = place
      meta.seq = place or meta.seq  -- as insert.lua writes it, for a version before places
      save_meta(k.req, id, meta)
      redis.call('LPUSH', front, id)
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

