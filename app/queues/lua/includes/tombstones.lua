-- Tombstones: what an ended request leaves so that a late caller hears "already ended" (and its queue manager how it
-- ended) rather than "unknown", kept as long as such a caller can come (docs/architecture.md, "Tombstones").
-- INCLUDES: base

-- They live in TOMBSTONE_BUCKETS hashes (k.tombs, AeKeys.tombstones) taken in turn, each for a time bucket of
-- `width` ms, a bucket expiring whole `tombstone_ms` after its last instant: no index per tombstone, no duty to
-- forget them. A width of just over tombstone_ms / (TOMBSTONE_BUCKETS - 1) lets a bucket's hash expire before its
-- turn comes again, so each tombstone lives between tombstone_ms and tombstone_ms + width.
-- A field is the request id in binary (the 12 bytes of its 16 URL-safe base64 characters), its value the outcome's
-- one letter and the queue manager's number. k.done keeps those written before (`<outcome>|<queue manager>`, an
-- entry in k.done_exp each) until the lease duty has forgotten them.
local TOMBSTONE_BUCKETS = 4
local OUTCOME_CODE = {completed = 'c', failed = 'f', deleted = 'd', purged = 'p', abandoned = 'a'}
local OUTCOME_OF = {c = 'completed', f = 'failed', d = 'deleted', p = 'purged', a = 'abandoned'}

-- A URL-safe base64 character's six bits (by its byte), or nil. By ranges rather than a table: an include's top level
-- runs at every call of its scripts, and building a table of 64 there cost a single-request lifecycle about a tenth
-- more Redis CPU (measured against the commit before buckets; by ranges, none).
local function sextet(b)
  if b >= 97 then return b <= 122 and b - 71 or nil end  -- a-z: 26 to 51
  if b >= 65 then
    if b <= 90 then return b - 65 end  -- A-Z: 0 to 25
    return b == 95 and 63 or nil  -- _
  end
  if b >= 48 then return b <= 57 and b + 4 or nil end  -- 0-9: 52 to 61
  return b == 45 and 62 or nil  -- -
end

-- The field of an id: 12 bytes for an id as inserts make them (16 URL-safe base64 characters), else the id itself
-- when shorter than 12 bytes, else the id and ':' (so that no two ids share a field). The service makes the same for
-- the ends it asks for (app/queues/tombstones.py; tests/queues/test_tombstones.py holds the two to each other).
local function tombstone_field(id)
  if #id == 16 then
    local bytes = {}
    for i = 1, 16, 4 do
      local a, b, c, d = string.byte(id, i, i + 3)
      a, b, c, d = sextet(a), sextet(b), sextet(c), sextet(d)
      if not (a and b and c and d) then return id .. ':' end
      local n = ((a * 64 + b) * 64 + c) * 64 + d
      bytes[#bytes + 1] = math.floor(n / 65536)
      bytes[#bytes + 1] = math.floor(n / 256) % 256
      bytes[#bytes + 1] = n % 256
    end
    return string.char(unpack(bytes))
  end
  return #id < 12 and id or id .. ':'
end

local function tombstone_value(outcome, qm)
  local code = OUTCOME_CODE[outcome]
  if code then return code .. (qm or '') end
  return '|' .. outcome .. '|' .. (qm or '')  -- an outcome without a letter (none yet), whole
end

-- The bucket `now` writes to, and when its hash expires.
local function tombstone_bucket(k, now, tombstone_ms)
  local width = math.floor(tombstone_ms / (TOMBSTONE_BUCKETS - 1)) + 1
  local n = math.floor(now / width)
  return k.tombs[n % TOMBSTONE_BUCKETS + 1], (n + 1) * width + tombstone_ms
end

-- Tombstones written at `now`: `ended` is a flat list of tombstone field (tombstone_field), outcome, queue manager
-- ('' for none).
local function write_tombstones(k, now, tombstone_ms, ended)
  if #ended == 0 then return end
  local key, expires = tombstone_bucket(k, now, tombstone_ms)
  local fields = {}
  for i = 1, #ended, 3 do
    append_pair(fields, ended[i], tombstone_value(ended[i + 1], ended[i + 2]))
  end
  in_chunks('HSET', key, fields)
  redis.call('PEXPIREAT', key, expires)
end

-- An id's tombstone as `<outcome>|<queue manager>` (the queue manager '' when not known), or nil.
local function tombstone_of(k, id)
  local field = tombstone_field(id)
  for _, key in ipairs(k.tombs) do
    local value = redis.call('HGET', key, field)
    if value then
      local outcome = OUTCOME_OF[string.sub(value, 1, 1)]
      if outcome then return outcome .. '|' .. string.sub(value, 2) end
      return string.sub(value, 2)
    end
  end
  return redis.call('HGET', k.done, id) or nil
end

-- A request that lives again (a dead letter retried) has no tombstone.
local function drop_tombstone(k, id)
  local field = tombstone_field(id)
  for _, key in ipairs(k.tombs) do redis.call('HDEL', key, field) end
  redis.call('HDEL', k.done, id)
end

-- An id that is not (or no longer) in the request hash: ended earlier, or never existed.
local function missing(k, id)
  local tombstone = tombstone_of(k, id)
  if tombstone then return {ALREADY_ENDED, string.match(tombstone, '^[^|]*')} end
  return {UNKNOWN_WORK}
end
