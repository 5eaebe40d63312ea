-- An operator queues a dead letter again (app/queues/dead_letters.py): the request lives again under its id (so
-- under its token), with its payload, no deliveries and its life counted up; its tombstone goes, so its queue
-- manager and servers see it queued. The dead letter goes in the same step: a second retry, however close behind,
-- finds nothing and queues nothing.
-- KEYS: req, payload, depth, classes, places, swept, sweeping, waiters, done, done_0, done_1, done_2, done_3, dead,
--       dead_at, holes, front, rear
-- ARGV: id, queue, position, notify_channel, wake_prefix
-- INCLUDES: tombstones, wake, places
-- queue: the dead letter's queue name, as its meta's class and dependence give it; position: 'front' or 'back'.
-- Returns {OK, the request's metadata (JSON)}, {UNKNOWN_DEAD_LETTER}, or {DEAD_LETTER_MOVED, its queue name} when
-- the lists passed are not its queue's.
local k = {req = KEYS[1], payload = KEYS[2], depth = KEYS[3], classes = KEYS[4], places = KEYS[5], swept = KEYS[6],
  sweeping = KEYS[7], waiters = KEYS[8], done = KEYS[9], tombs = {KEYS[10], KEYS[11], KEYS[12], KEYS[13]}, dead = KEYS[14],
  dead_at = KEYS[15], holes = KEYS[16]}
local front, rear = KEYS[17], KEYS[18]
local id, queue, position = ARGV[1], ARGV[2], ARGV[3]

local raw = redis.call('HGET', k.dead, id)
if not raw then return {UNKNOWN_DEAD_LETTER} end
local letter = cjson.decode(raw)
local meta = letter.meta
local its_queue = meta.sc .. ':' .. (meta.dep and 'dep' or 'ind')
if its_queue ~= queue then return {DEAD_LETTER_MOVED, its_queue} end

local now = now_ms()
meta.life = (meta.life or 1) + 1
meta.first_inserted = meta.first_inserted or meta.inserted
meta.inserted = now
if position == 'front' then
  meta.place = front_place(k, queue, front, rear)
else
  meta.place = back_places(k, queue, 1)
end
meta.seq = meta.place or meta.seq  -- as insert.lua writes it, for a version before places
meta.state = 'q'
meta.deliveries = 0
for _, field in ipairs({'server', 'selected', 'begun', 'ended', 'outcome', 'result', 'error', 'id'}) do
  meta[field] = nil
end
local encoded = cjson.encode(meta)
redis.call('HSET', k.req, id, encoded)
redis.call('HSET', k.payload, id, letter.payload)
drop_tombstone(k, id)
redis.call('HDEL', k.dead, id)
redis.call('ZREM', k.dead_at, id)
if position == 'front' then
  -- Ahead of everything, as a request given back is (give_back in includes/give_back.lua).
  redis.call('LPUSH', front, id)
else
  -- Behind everything, as a new request is (insert.lua): a swept queue takes it at its rear.
  local swept = redis.call('HEXISTS', k.swept, queue) == 1 or redis.call('HEXISTS', k.sweeping, queue) == 1
  redis.call('RPUSH', (swept or redis.call('EXISTS', rear) == 1) and rear or front, id)
end
redis.call('HINCRBY', k.depth, meta.sc, 1)
redis.call('SADD', k.classes, meta.sc)
wake(k.waiters, ARGV[4], ARGV[5], 1)
return {OK, encoded}
