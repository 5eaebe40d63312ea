-- Give back everything a server holds when it disconnects or dies, and unregister it: each request goes to the
-- front of its class queue, or is abandoned once it has been delivered max deliveries times (give_back in includes/give_back.lua).
-- KEYS: req, payload, depth, leases, inflight, servers, records, exits, done, done_exp, seen, fence, waiters,
--       served_at, dead, dead_at, swept, places, holes; per class: dep_front, dep_rear, ind_front, ind_rear
-- ARGV: max_deliveries, tombstone_ms, notify_channel, wake_prefix, epoch, server, dead_keep_ms; per class: class
-- INCLUDES: give_back
-- Per class in ARGV order, its dependent and independent queues' lists; epoch 0: not a scheduler's duty, not fenced.
-- Returns {OK, requeued, abandoned, ids of abandoned...}, or {FENCED, epoch} when a newer scheduler already acted here.
local k = {req = KEYS[1], payload = KEYS[2], depth = KEYS[3], leases = KEYS[4], inflight = KEYS[5], servers = KEYS[6],
  records = KEYS[7], exits = KEYS[8], done = KEYS[9], done_exp = KEYS[10], seen = KEYS[11], fence = KEYS[12],
  waiters = KEYS[13], served_at = KEYS[14], dead = KEYS[15], dead_at = KEYS[16], swept = KEYS[17], places = KEYS[18],
  holes = KEYS[19]}
local now, server = now_ms(), ARGV[6]
local newer = fenced_by(k.fence, tonumber(ARGV[5]))
if newer then return {FENCED, newer} end
local result = give_back(k, redis.call('ZRANGE', k.leases, 0, -1), server, now)
redis.call('HDEL', k.servers, server)
redis.call('HDEL', k.inflight, server)
redis.call('HDEL', k.seen, server)
redis.call('HDEL', k.served_at, server)
return result
