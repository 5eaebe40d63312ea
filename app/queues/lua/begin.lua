-- A server begins a request it selected (IWM4STBG); the completion time starts again.
-- KEYS: req, leases, done
-- ARGV: id, server id, lease ms
-- Returns {0, the lease's end (ms)}, {-1} unknown, {-5, outcome} already ended, {-6} not held by this server.
local k = {req = KEYS[1], leases = KEYS[2], done = KEYS[3]}
local now, id, server, lease_ms = now_ms(), ARGV[1], ARGV[2], tonumber(ARGV[3])
local meta = load_meta(k.req, id)
if not meta then return missing(k, id) end
if meta.state == 'q' or meta.server ~= server then return {-6} end
if meta.state == 's' then
  meta.state = 'b'
  meta.begun = now
  save_meta(k.req, id, meta)
end
redis.call('ZADD', k.leases, now + lease_ms, id)
return {0, now + lease_ms}
