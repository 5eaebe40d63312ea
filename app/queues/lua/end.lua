-- A server ends requests it holds (IWM4STEN): each one's work record is written and its worker task freed.
-- KEYS: req, payload, leases, inflight, records, exits, done, done_0, done_1, done_2, done_3, samples, dead, dead_at,
--       buckets, histograms
-- ARGV: server, tombstone_ms, samples_ms, dead_keep_ms; per end: id, outcome, result, error, dead_letter, life,
--       tombstone
-- INCLUDES: end_held
-- Per end: result JSON text or '', error text or '', dead_letter '1' to dead-letter it if failed or '', life: the
-- life its token names (1 unless a dead letter retried), tombstone: its tombstone's field (app/queues/tombstones.py).
-- done_0 ... done_3: the tombstones' buckets (includes/tombstones.lua).
-- Returns {OK, then per request: code, value} (see end_held in includes/end_held.lua).
local k = {req = KEYS[1], payload = KEYS[2], leases = KEYS[3], inflight = KEYS[4], records = KEYS[5], exits = KEYS[6],
  done = KEYS[7], tombs = {KEYS[8], KEYS[9], KEYS[10], KEYS[11]}, samples = KEYS[12], dead = KEYS[13], dead_at = KEYS[14],
  buckets = KEYS[15], histograms = KEYS[16]}
local result = {OK}
end_held(k, ARGV[1], now_ms(), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), 5, #ARGV, result)
return result
