-- A server begins a request it selected (IWM4STBG); the completion time starts again.
-- KEYS: req, leases, done
-- ARGV: id, server, lease_ms
-- INCLUDES: base
-- Returns {OK, the lease's end (ms)}, {UNKNOWN_WORK}, {ALREADY_ENDED, outcome}, {NOT_HOLDER}.
local k = {req = KEYS[1], leases = KEYS[2], done = KEYS[3]}
local now, id, server, lease_ms = now_ms(), ARGV[1], ARGV[2], tonumber(ARGV[3])
local meta = load_meta(k.req, id)
if not meta then return missing(k, id) end
if meta.state == 'q' or meta.server ~= server then return {NOT_HOLDER} end
if meta.state == 's' then
  meta.state = 'b'
  meta.begun = now
  save_meta(k.req, id, meta)
end
redis.call('ZADD', k.leases, now + lease_ms, id)
return {OK, now + lease_ms}
