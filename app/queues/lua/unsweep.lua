-- Brings a swept queue's first blob back from the database (after TPF MQSeries'): its requests go, in order, behind what the
-- front holds (nothing, or requests given back by expired leases, which come first anyway). Run when a select finds
-- the front empty; once the chain is empty the rear joins the front at the next select (select.lua).
-- KEYS: req, payload, front, chain, swept, swept_deleted, places
-- ARGV: queue, blob; per request: id, meta, payload
-- INCLUDES: places
-- Returns {OK, restored}, or {BLOB_RESTORED} when that blob is no longer the chain's first (another process brought it back).
local k = {req = KEYS[1], payload = KEYS[2], front = KEYS[3], chain = KEYS[4], swept = KEYS[5], swept_deleted = KEYS[6],
  places = KEYS[7]}
local queue, blob = ARGV[1], ARGV[2]
if redis.call('LINDEX', k.chain, 0) ~= blob then return {BLOB_RESTORED} end
redis.call('LPOP', k.chain)
local restored = 0
for i = 3, #ARGV, 3 do
  local id = ARGV[i]
  -- Deleted (or purged) while in the database: its record was written then.
  if redis.call('SREM', k.swept_deleted, id) == 0 then
    redis.call('HSET', k.req, id, ARGV[i + 1])
    redis.call('HSET', k.payload, id, ARGV[i + 2])
    redis.call('RPUSH', k.front, id)
    restored = restored + 1
  end
end
if redis.call('LLEN', k.chain) == 0 then
  redis.call('HDEL', k.swept, queue)
  set_chain_start(k, queue, nil)
else
  if restored > 0 then redis.call('HINCRBY', k.swept, queue, -restored) end
  -- The next blob follows this one's last request (the places between are holes: includes/places.lua).
  local last = #ARGV >= 5 and cjson.decode(ARGV[#ARGV - 1]).place
  set_chain_start(k, queue, last and last + 1)
end
return {OK, restored}
