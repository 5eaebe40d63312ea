-- Give back everything a server holds when it disconnects or dies, and unregister it: each request goes to the
-- front of its class queue, or is abandoned once it has been delivered max deliveries times (give_back in includes/give_back.lua).
-- KEYS: req, payload, depth, leases, inflight, servers, records, exits, done, done_0, done_1, done_2, done_3, seen,
--       fence, waiters, served_at, dead, dead_at, swept, places, holes; per class: dep_front, dep_rear, ind_front,
--       ind_rear
-- ARGV: max_deliveries, tombstone_ms, notify_channel, wake_prefix, epoch, server, dead_keep_ms; per class: class
-- INCLUDES: give_back
-- Per class in ARGV order, its dependent and independent queues' lists; epoch 0: not a scheduler's duty, not fenced.
-- Returns {OK, requeued, abandoned, ids of abandoned...}, or {FENCED, epoch} when a newer scheduler already acted here.
local k = {req = KEYS[1], payload = KEYS[2], depth = KEYS[3], leases = KEYS[4], inflight = KEYS[5], servers = KEYS[6],
  records = KEYS[7], exits = KEYS[8], done = KEYS[9], tombs = {KEYS[10], KEYS[11], KEYS[12], KEYS[13]}, seen = KEYS[14],
  fence = KEYS[15], waiters = KEYS[16], served_at = KEYS[17], dead = KEYS[18], dead_at = KEYS[19], swept = KEYS[20],
  places = KEYS[21], holes = KEYS[22]}
local now, server = now_ms(), ARGV[6]
local newer = fenced_by(k.fence, tonumber(ARGV[5]))
if newer then return {FENCED, newer} end
local result = give_back(k, redis.call('ZRANGE', k.leases, 0, -1), server, now)
redis.call('HDEL', k.servers, server)
redis.call('HDEL', k.inflight, server)
redis.call('HDEL', k.seen, server)
redis.call('HDEL', k.served_at, server)
return result
