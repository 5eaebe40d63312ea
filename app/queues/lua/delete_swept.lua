-- Delete (IWM4QDE) or purge (IWM4DIS) a request whose blob is in the database (after TPF MQSeries'): its work record is
-- written now, and it is left out when the blob comes back.
-- KEYS: req, payload, depth, records, exits, done, done_0, done_1, done_2, done_3, holes, chain, swept,
--       swept_deleted
-- ARGV: outcome, queue_manager, tombstone_ms, queue, blob, id, meta
-- INCLUDES: removal
-- outcome: 'deleted' or 'purged'.
-- Returns {OK, record}; {UNKNOWN_WORK} or {ALREADY_ENDED, outcome} as delete_queued.lua; {NOT_SWEPT}: it is in memory
-- (its blob came back meanwhile): remove it from the queues instead.
local k = {req = KEYS[1], payload = KEYS[2], depth = KEYS[3], records = KEYS[4], exits = KEYS[5], done = KEYS[6],
  tombs = {KEYS[7], KEYS[8], KEYS[9], KEYS[10]}, holes = KEYS[11], chain = KEYS[12], swept = KEYS[13],
  swept_deleted = KEYS[14]}
local now, outcome, qm, tombstone_ms = now_ms(), ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local queue, blob, id = ARGV[4], ARGV[5], ARGV[6]
if redis.call('HEXISTS', k.req, id) == 1 then return {NOT_SWEPT} end
if redis.call('SISMEMBER', k.swept_deleted, id) == 1 or not redis.call('LPOS', k.chain, blob) then
  return missing(k, id)
end
local meta = cjson.decode(ARGV[7])
if meta.qm ~= qm then return {UNKNOWN_WORK} end
redis.call('SADD', k.swept_deleted, id)
redis.call('HINCRBY', k.swept, queue, -1)
return {OK, remove_queued(k, id, meta, outcome, now, tombstone_ms)}
