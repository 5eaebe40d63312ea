-- Select work for a server (IWM4SSL): most important class first, dependent before independent, FIFO within.
-- KEYS: req, payload, depth, leases, inflight, servers, seen, then per class in order: dependent list,
--       independent list
-- ARGV: now_ms, server id, lease ms, max items, begin at once ('1' or '0'), class names in KEYS order
-- Returns {0, id, meta, payload, ...} (possibly no items), {-2} server not registered,
-- {-3, inflight, tasks} server at capacity, {-4} overflow server while another server has capacity.
local k = {req = KEYS[1], payload = KEYS[2], depth = KEYS[3], leases = KEYS[4], inflight = KEYS[5], servers = KEYS[6],
  seen = KEYS[7]}
local now, server, lease_ms, max_items, begin_now = now_ms(), ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4]), ARGV[5] == '1'

local raw = redis.call('HGET', k.servers, server)
if not raw then return {-2} end
redis.call('HSET', k.seen, server, now)  -- a selecting server is alive
local me = cjson.decode(raw)
local inflight = tonumber(redis.call('HGET', k.inflight, server) or '0')
if inflight >= me.tasks then return {-3, inflight, me.tasks} end

if me.overflow then
  local all = redis.call('HGETALL', k.servers)
  for i = 1, #all, 2 do
    local other = cjson.decode(all[i + 1])
    if not other.overflow and tonumber(redis.call('HGET', k.inflight, all[i]) or '0') < other.tasks then
      return {-4}
    end
  end
end

local want = math.min(me.tasks - inflight, max_items)
local result, got = {0}, 0
for list = 8, #KEYS do
  if got >= want then break end
  local class = ARGV[6 + math.floor((list - 8) / 2)]
  while got < want do
    local id = redis.call('LPOP', KEYS[list])
    if not id then break end
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
    end
  end
end
if got > 0 then
  redis.call('HINCRBY', k.inflight, server, got)
end
return result
