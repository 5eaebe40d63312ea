-- What most scripts use: Redis's clock, commands in chunks, a request's metadata, fencing, an unknown id's answer.
-- Keys follow app/queues/keys.py; the return codes (OK, UNKNOWN_WORK ...) are the prelude's Lua locals
-- (app/queues/codes.py).
--
-- A request's metadata is one JSON object in the hash KEYS req (field: request id), its keys as
-- app/queues/request_meta.py defines them; its payload lives apart in KEYS payload so that state changes never copy
-- it.
-- States: q (queued), s (selected), b (begun).

-- The one clock is Redis's: every instant of a request's life and of a lease is read here, inside the script that
-- acts on it, so neither a caller's clock (replicas on other hosts) nor the delay before its call orders anything.
local function now_ms()
  local time = redis.call('TIME')
  return tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
end

-- A variadic command (HSET, RPUSH, ZADD ...) on `key` with `values`, in chunks that Lua's stack takes (an even
-- size, so that field-value pairs stay together). Returns the sum of the replies (what ZREM or HDEL removed).
local CHUNK = 1000
local function in_chunks(command, key, values)
  local total = 0
  for first = 1, #values, CHUNK do
    total = total + redis.call(command, key, unpack(values, first, math.min(first + CHUNK - 1, #values)))
  end
  return total
end

local function append_pair(list, a, b)
  list[#list + 1] = a
  list[#list + 1] = b
end

local function load_meta(req_key, id)
  local raw = redis.call('HGET', req_key, id)
  if not raw then return nil end
  return cjson.decode(raw)
end

local function save_meta(req_key, id, meta)
  redis.call('HSET', req_key, id, cjson.encode(meta))
end

-- Fencing: a scheduler's duty (epoch > 0) acts on a queue only with an epoch at least the highest that did here.
-- Returns the newer epoch that refuses this one, or nil (and records this epoch when it is the newest).
local function fenced_by(fence_key, epoch)
  if epoch <= 0 then return nil end
  local highest = tonumber(redis.call('GET', fence_key) or 0)
  if epoch < highest then return highest end
  if epoch > highest then redis.call('SET', fence_key, epoch) end
  return nil
end
