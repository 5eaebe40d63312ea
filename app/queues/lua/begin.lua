-- A server begins a request it selected (IWM4STBG); the completion time starts again.
-- KEYS: req, leases, done, done_0, done_1, done_2, done_3
-- ARGV: id, server, lease_ms, life
-- INCLUDES: tombstones
-- life: the life its token names (1 unless a dead letter retried): an earlier life's begin is told it ended.
-- Returns {OK, the lease's end (ms)}, {UNKNOWN_WORK}, {ALREADY_ENDED, outcome}, {NOT_HOLDER}.
local k = {req = KEYS[1], leases = KEYS[2], done = KEYS[3], tombs = {KEYS[4], KEYS[5], KEYS[6], KEYS[7]}}
local now, id, server, lease_ms, life = now_ms(), ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local meta = load_meta(k.req, id)
if not meta then return missing(k, id) end
if (meta.life or 1) > life then return {ALREADY_ENDED, ''} end
if (meta.life or 1) < life then return {UNKNOWN_WORK} end
if meta.state == 'q' or meta.server ~= server then return {NOT_HOLDER} end
if meta.state == 's' then
  meta.state = 'b'
  meta.begun = now
  save_meta(k.req, id, meta)
end
redis.call('ZADD', k.leases, now + lease_ms, id)
return {OK, now + lease_ms}
