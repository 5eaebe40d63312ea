-- A server ends requests it holds (IWM4STEN): each one's work record is written and its worker task freed.
-- Each request is judged on its own: one that can no longer be ended (its lease expired and it went to another
-- server, or it already ended) does not stop the others.
-- KEYS: req, payload, leases, inflight, records, exits, done, done_exp
-- ARGV: now_ms, server id, tombstone ms, then per request: id, outcome, result (JSON text, '' for none)
-- Returns {0, then per request: code, value}: 0 and the record, -1 and '' (unknown), -5 and the outcome
-- (already ended), -6 and '' (not held by this server).
local k = {req = KEYS[1], payload = KEYS[2], leases = KEYS[3], inflight = KEYS[4], records = KEYS[5], exits = KEYS[6],
  done = KEYS[7], done_exp = KEYS[8]}
local now, server, tombstone_ms = now_ms(), ARGV[2], tonumber(ARGV[3])
local result, ended = {0}, 0
for i = 4, #ARGV, 3 do
  local id = ARGV[i]
  local meta = load_meta(k.req, id)
  if not meta then
    local gone = missing(k, id)
    result[#result + 1] = gone[1]
    result[#result + 1] = gone[2] or ''
  elseif meta.state == 'q' or meta.server ~= server then
    result[#result + 1] = -6
    result[#result + 1] = ''
  else
    redis.call('ZREM', k.leases, id)
    if ARGV[i + 2] ~= '' then meta.result = ARGV[i + 2] end
    result[#result + 1] = 0
    result[#result + 1] = finish(k, id, meta, ARGV[i + 1], now, tombstone_ms)
    ended = ended + 1
  end
end
if ended > 0 then
  redis.call('HINCRBY', k.inflight, server, -ended)
end
return result
