-- An operator discards dead letters (app/queues/dead_letters.py).
-- KEYS: dead, dead_at
-- ARGV: per request: id
-- Returns {OK, the ids that were dead letters (and are gone now)...}.
local result = {OK}
for _, id in ipairs(ARGV) do
  if redis.call('HDEL', KEYS[1], id) == 1 then
    redis.call('ZREM', KEYS[2], id)
    result[#result + 1] = id
  end
end
return result
