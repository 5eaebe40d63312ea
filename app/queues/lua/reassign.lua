-- Give held requests back: those whose completion time passed (mode 'expired'), or all a server holds when it
-- disconnects or dies (mode 'server', which also unregisters it). Each goes to the front of its class queue,
-- or is abandoned once it has been delivered max deliveries times.
-- KEYS: req, payload, depth, leases, inflight, servers, records, exits, done, done_exp, seen, fence, then per
--       class (in ARGV order): dependent list, independent list
-- ARGV: mode, server id (mode 'server') or '', max deliveries, tombstone ms, batch size, notify channel, scheduler
--       epoch (0: not a scheduler's duty, not fenced), class names...
-- Returns {0, requeued, abandoned, ids of abandoned...}, or {-12, epoch} when a newer scheduler already acted here.
local k = {req = KEYS[1], payload = KEYS[2], depth = KEYS[3], leases = KEYS[4], inflight = KEYS[5], servers = KEYS[6],
  records = KEYS[7], exits = KEYS[8], done = KEYS[9], done_exp = KEYS[10], seen = KEYS[11], fence = KEYS[12]}
local now, mode, only_server = now_ms(), ARGV[1], ARGV[2]
local max_deliveries, tombstone_ms, batch = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])

local newer = fenced_by(k.fence, tonumber(ARGV[7]))
if newer then return {-12, newer} end

local lists = {}
for i = 8, #ARGV do
  local base = 12 + 2 * (i - 8)
  lists[ARGV[i]] = {KEYS[base + 1], KEYS[base + 2]}
end

local ids
if mode == 'expired' then
  ids = redis.call('ZRANGEBYSCORE', k.leases, '-inf', now, 'LIMIT', 0, batch)
else
  ids = redis.call('ZRANGE', k.leases, 0, -1)
end

-- Newest first, so that pushing each to the front leaves them in their original order.
local taken = {}
for _, id in ipairs(ids) do
  local meta = load_meta(k.req, id)
  if not meta then
    redis.call('ZREM', k.leases, id)
  elseif (mode == 'expired' or meta.server == only_server) and lists[meta.sc] then
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
    finish(k, id, meta, 'abandoned', now, tombstone_ms)
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
  redis.call('PUBLISH', ARGV[6], requeued)
end
if mode == 'server' then
  redis.call('HDEL', k.servers, only_server)
  redis.call('HDEL', k.inflight, only_server)
  redis.call('HDEL', k.seen, only_server)
end
table.insert(result, 1, abandoned)
table.insert(result, 1, requeued)
table.insert(result, 1, 0)
return result
