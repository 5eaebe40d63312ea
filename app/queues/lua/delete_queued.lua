-- A queue manager deletes one of its queued requests (IWM4QDE).
-- KEYS: req, payload, depth, records, exits, done, done_0, done_1, done_2, done_3, holes
-- ARGV: queue_manager, id, tombstone_ms
-- INCLUDES: removal
-- Returns {OK, record}, {UNKNOWN_WORK} not in memory (perhaps swept), {UNKNOWN_WORK, 'foreign'} another queue
-- manager's (not revealed to the caller; no need to look among the swept), {ALREADY_ENDED, outcome},
-- {NOT_QUEUED, state} no longer queued.
local k = {req = KEYS[1], payload = KEYS[2], depth = KEYS[3], records = KEYS[4], exits = KEYS[5], done = KEYS[6],
  tombs = {KEYS[7], KEYS[8], KEYS[9], KEYS[10]}, holes = KEYS[11]}
local qm, id, tombstone_ms = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3])
local meta = load_meta(k.req, id)
if not meta then return missing(k, id) end
if meta.qm ~= qm then return {UNKNOWN_WORK, 'foreign'} end
if meta.state ~= 'q' then return {NOT_QUEUED, meta.state} end
return {OK, remove_queued(k, id, meta, 'deleted', now_ms(), tombstone_ms)}
