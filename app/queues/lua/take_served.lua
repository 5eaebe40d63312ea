-- The sweeper's measure of service rates (after TPF MQSeries'): the requests selected per queue since the last call, and how
-- long that was by Redis's clock, so a pass that came late, or on a newly elected scheduler, counts the time it
-- covered. Counting starts again at once.
-- KEYS: served
-- ARGV: none
-- INCLUDES: base
-- served: hash queue name -> requests selected; the field 'since' -> when counting began (ms).
-- Returns {OK, elapsed ms ('' when counting had not begun), then per queue: name, count}
local SINCE = 'since'  -- queue names always hold a ':', so no queue is called this
local now = now_ms()
local counts = redis.call('HGETALL', KEYS[1])
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], SINCE, now)
local result = {OK, ''}
for i = 1, #counts, 2 do
  if counts[i] == SINCE then
    result[2] = now - tonumber(counts[i + 1])
  else
    result[#result + 1] = counts[i]
    result[#result + 1] = counts[i + 1]
  end
end
return result
