-- A server ends requests it holds (IWM4STEN): each one's work record is written and its worker task freed.
-- KEYS: req, payload, leases, inflight, records, exits, done, done_exp, samples, dead, dead_at, buckets, histograms
-- ARGV: server, tombstone_ms, samples_ms, dead_keep_ms; per end: id, outcome, result, error, dead_letter
-- INCLUDES: end_held
-- Per end: result JSON text or '', error text or '', dead_letter '1' to dead-letter it if failed or ''.
-- Returns {OK, then per request: code, value} (see end_held in includes/end_held.lua).
local k = {req = KEYS[1], payload = KEYS[2], leases = KEYS[3], inflight = KEYS[4], records = KEYS[5], exits = KEYS[6],
  done = KEYS[7], done_exp = KEYS[8], samples = KEYS[9], dead = KEYS[10], dead_at = KEYS[11], buckets = KEYS[12],
  histograms = KEYS[13]}
local result = {OK}
end_held(k, ARGV[1], now_ms(), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), 5, #ARGV, result)
return result
