-- The outbox's incarnation, the position of its first record and its first `limit` records, read together (a
-- record's position is fixed while it waits: see ack_records.lua). An outbox with records but without a count of
-- dropped records (new, or Redis lost the count) or without an incarnation gets a new incarnation: positions
-- counted again from 0 are then never taken for the records that held them before. An empty outbox is left as it
-- is (flushes find most outboxes empty: no write each time).
-- KEYS: records, records_acked, records_incarnation
-- ARGV: limit, incarnation
-- Returns {OK, incarnation ('' for an empty outbox without one), first position, records}
local records = redis.call('LRANGE', KEYS[1], 0, tonumber(ARGV[1]) - 1)
local acked = redis.call('GET', KEYS[2])
local incarnation = redis.call('GET', KEYS[3])
if #records > 0 and (not acked or not incarnation) then
  incarnation = ARGV[2]
  redis.call('SET', KEYS[3], incarnation)
end
return {OK, incarnation or '', tonumber(acked or 0), records}
