-- A server's heartbeat: every request it holds gets its completion time anew.
-- KEYS: req, leases, seen
-- ARGV: server, lease_ms
-- INCLUDES: base
-- Returns {OK, extended}
local now, server, lease_ms = now_ms(), ARGV[1], tonumber(ARGV[2])
redis.call('HSET', KEYS[3], server, now)
local extended = 0
for _, id in ipairs(redis.call('ZRANGE', KEYS[2], 0, -1)) do
  local meta = load_meta(KEYS[1], id)
  if meta and meta.server == server then
    redis.call('ZADD', KEYS[2], now + lease_ms, id)
    extended = extended + 1
  end
end
return {OK, extended}
