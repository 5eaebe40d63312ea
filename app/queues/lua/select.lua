-- Select work for a server (IWM4SSL), after ending what it asks to end (IWM4STEN) in the same call: its home
-- class first (the one the manager gave it, if any), then the most important class first; dependent before
-- independent, FIFO within.
-- KEYS: req, payload, depth, leases, inflight, servers, seen, records, exits, done, done_exp, samples, assign,
--       retire, swept, served, then per class in order: dependent front and rear lists, independent front and rear
-- ARGV: server id, lease ms, max items, begin at once ('1' or '0'), tombstone ms, samples ms, number of ends,
--       then per end: id, outcome, result (JSON text, '' for none); then the class names in KEYS order
-- Returns {status, number of ends, per end: code, value (see end_held), then by status}: 0 and per item: id, meta,
-- payload (possibly no items); -2 server not registered; -3 and in flight, tasks: server at capacity; -4 overflow
-- server while another server has capacity; -11 the server is surplus and is to end (0C14); -13 and a queue name:
-- that queue's front is empty and it goes on in the database, so its next blob must come back first (nothing
-- behind it may be taken before). The ends apply whatever the status.
local k = {req = KEYS[1], payload = KEYS[2], depth = KEYS[3], leases = KEYS[4], inflight = KEYS[5], servers = KEYS[6],
  seen = KEYS[7], records = KEYS[8], exits = KEYS[9], done = KEYS[10], done_exp = KEYS[11], samples = KEYS[12],
  assign = KEYS[13], retire = KEYS[14], swept = KEYS[15], served = KEYS[16]}
local FIRST_LIST = 17
local now, server, lease_ms, max_items, begin_now = now_ms(), ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4] == '1'
local ends = tonumber(ARGV[7])
local first_class = 8 + 3 * ends

local result = {0, ends}
end_held(k, server, now, tonumber(ARGV[5]), tonumber(ARGV[6]), 8, first_class - 1, result)

local function refuse(status, ...)
  result[1] = status
  for _, value in ipairs({...}) do result[#result + 1] = value end
  return result
end

local raw = redis.call('HGET', k.servers, server)
if not raw then return refuse(-2) end
redis.call('HSET', k.seen, server, now)  -- a selecting server is alive
if redis.call('SISMEMBER', k.retire, server) == 1 then return refuse(-11) end
local me = cjson.decode(raw)
local inflight = tonumber(redis.call('HGET', k.inflight, server) or '0')
if inflight >= me.tasks then return refuse(-3, inflight, me.tasks) end

if me.overflow then
  local all = redis.call('HGETALL', k.servers)
  for i = 1, #all, 2 do
    local other = cjson.decode(all[i + 1])
    if not other.overflow and tonumber(redis.call('HGET', k.inflight, all[i]) or '0') < other.tasks then
      return refuse(-4)
    end
  end
end

local want = math.min(me.tasks - inflight, max_items)
local got = 0
-- Class positions (0-based) in the order to look at them: the home class, then the others most important first.
local classes, home = {}, redis.call('HGET', k.assign, server)
for i = 0, (#KEYS - FIRST_LIST + 1) / 4 - 1 do
  if ARGV[first_class + i] == home then table.insert(classes, 1, i) else classes[#classes + 1] = i end
end

-- Takes up to `want - got` requests from the front of one queue; the rear joins the front when the front is empty
-- and nothing of the queue is in the database. Returns false when the queue's next requests are in the database.
local function take(class, queue, front, rear)
  local taken, blocked = 0, false
  while got < want do
    local id = redis.call('LPOP', front)
    if not id then
      if redis.call('HEXISTS', k.swept, queue) == 1 then
        blocked = true
        break
      end
      if redis.call('EXISTS', rear) == 0 then break end
      redis.call('RENAME', rear, front)
    else
      local meta = load_meta(k.req, id)
      -- Entries of deleted requests stay in the list (deleting from its middle is O(n)); they are skipped here.
      if meta and meta.state == 'q' then
        meta.state = 's'
        meta.server = server
        meta.selected = now
        meta.deliveries = (meta.deliveries or 0) + 1
        if begin_now then
          meta.state = 'b'
          meta.begun = now
        end
        save_meta(k.req, id, meta)
        redis.call('ZADD', k.leases, now + lease_ms, id)
        redis.call('HINCRBY', k.depth, class, -1)
        result[#result + 1] = id
        result[#result + 1] = cjson.encode(meta)
        result[#result + 1] = redis.call('HGET', k.payload, id)
        got = got + 1
        taken = taken + 1
      end
    end
  end
  if taken > 0 then
    redis.call('HINCRBY', k.served, queue, taken)
  end
  return not blocked
end

local blocked = nil
for _, position in ipairs(classes) do
  if got >= want or blocked then break end
  local class = ARGV[first_class + position]
  for part, kind in ipairs({'dep', 'ind'}) do
    local base = FIRST_LIST + 4 * position + 2 * (part - 1)
    local queue = class .. ':' .. kind
    if not take(class, queue, KEYS[base], KEYS[base + 1]) then
      blocked = queue
      break
    end
  end
end
if blocked and got == 0 then return refuse(-13, blocked) end
if got > 0 then
  redis.call('HINCRBY', k.inflight, server, got)
end
return result
