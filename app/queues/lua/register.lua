-- A server registers with an environment's queues (IWM4CON): its worker tasks, weight and overflow flag, and the
-- moment it was last seen, which the liveness duty compares with Redis's clock.
-- KEYS: servers, seen
-- ARGV: server, registration
-- INCLUDES: base
-- registration: JSON {tasks, weight, overflow}.
-- Returns {OK}
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('HSET', KEYS[2], ARGV[1], now_ms())
return {OK}
