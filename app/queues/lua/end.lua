-- A server ends a request it holds (IWM4STEN): the work record is written and the server's capacity freed.
-- KEYS: req, payload, leases, inflight, records, exits, done, done_exp
-- ARGV: now_ms, id, server id, outcome, tombstone ms, result (JSON text, '' for none)
-- Returns {0, record}, {-1} unknown, {-5, outcome} already ended, {-6} not held by this server.
local k = {req = KEYS[1], payload = KEYS[2], leases = KEYS[3], inflight = KEYS[4], records = KEYS[5], exits = KEYS[6],
  done = KEYS[7], done_exp = KEYS[8]}
local now, id, server = now_ms(), ARGV[2], ARGV[3]
local meta = load_meta(k.req, id)
if not meta then return missing(k, id) end
if meta.state == 'q' or meta.server ~= server then return {-6} end
redis.call('ZREM', k.leases, id)
redis.call('HINCRBY', k.inflight, server, -1)
if ARGV[6] ~= '' then meta.result = ARGV[6] end
return {0, finish(k, id, meta, ARGV[4], now, tonumber(ARGV[5]))}
