-- Claim exit calls that are due: each claimed entry is pushed back by the claim time, so a caller that dies
-- while delivering leaves it to be claimed again (at least once).
-- KEYS: exits
-- ARGV: claim_ms, limit
-- INCLUDES: base
-- Returns {OK, entry...}
local now, claim_ms = now_ms(), tonumber(ARGV[1])
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, tonumber(ARGV[2]))
for _, entry in ipairs(due) do
  redis.call('ZADD', KEYS[1], now + claim_ms, entry)
end
table.insert(due, 1, OK)
return due
