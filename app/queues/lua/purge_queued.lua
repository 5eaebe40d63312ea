-- A page of a disconnected queue manager's queued requests is purged (IWM4DIS); call again with the returned
-- cursor until it is '0'.
-- KEYS: req, payload, depth, records, exits, done, done_0, done_1, done_2, done_3, holes
-- ARGV: queue_manager, cursor, page, tombstone_ms
-- INCLUDES: removal
-- Returns {OK, next cursor, purged count}
local k = {req = KEYS[1], payload = KEYS[2], depth = KEYS[3], records = KEYS[4], exits = KEYS[5], done = KEYS[6],
  tombs = {KEYS[7], KEYS[8], KEYS[9], KEYS[10]}, holes = KEYS[11]}
local now, qm, tombstone_ms = now_ms(), tonumber(ARGV[1]), tonumber(ARGV[4])
local page = redis.call('HSCAN', k.req, ARGV[2], 'COUNT', tonumber(ARGV[3]))
local purged = 0
for i = 1, #page[2], 2 do
  local meta = cjson.decode(page[2][i + 1])
  if meta.qm == qm and meta.state == 'q' then
    remove_queued(k, page[2][i], meta, 'purged', now, tombstone_ms)
    purged = purged + 1
  end
end
return {OK, page[1], purged}
