-- Remove queued requests: one by its queue manager (IWM4QDE, mode 'delete'), or a page of a disconnected
-- queue manager's (IWM4DIS purge, mode 'purge'; call again with the returned cursor until it is '0').
-- KEYS: req, payload, depth, records, exits, done, done_exp
-- ARGV: mode, queue manager id, id (delete) or cursor (purge), page size, tombstone ms
-- Returns delete: {0, record}, {-1}, {-5, outcome}, {-7} another queue manager's, {-8, state} no longer queued;
--         purge: {0, next cursor, purged count}
local k = {req = KEYS[1], payload = KEYS[2], depth = KEYS[3], records = KEYS[4], exits = KEYS[5], done = KEYS[6],
  done_exp = KEYS[7]}
local now, mode, qm, tombstone_ms = now_ms(), ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[5])

local function remove(id, meta, outcome)
  redis.call('HINCRBY', k.depth, meta.sc, -1)
  return finish(k, id, meta, outcome, now, tombstone_ms)
end

if mode == 'delete' then
  local id = ARGV[3]
  local meta = load_meta(k.req, id)
  if not meta then return missing(k, id) end
  if meta.qm ~= qm then return {-7} end
  if meta.state ~= 'q' then return {-8, meta.state} end
  return {0, remove(id, meta, 'deleted')}
end

local page = redis.call('HSCAN', k.req, ARGV[3], 'COUNT', tonumber(ARGV[4]))
local purged = 0
for i = 1, #page[2], 2 do
  local meta = cjson.decode(page[2][i + 1])
  if meta.qm == qm and meta.state == 'q' then
    remove(page[2][i], meta, 'purged')
    purged = purged + 1
  end
end
return {0, page[1], purged}
