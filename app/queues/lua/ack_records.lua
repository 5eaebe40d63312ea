-- Drop the first n work records of the outbox once they are durable elsewhere, but only if they are still the
-- ones read (first and last match): a concurrent flusher that acknowledged them first makes this a no-op. The
-- count of records ever dropped grows with them, so a record's position in the outbox (that count plus its
-- index) stays the same while it waits: files declare the positions they hold, and a reader knows which files
-- can share records.
-- KEYS: records, records_acked
-- ARGV: count, first, last
-- Returns {OK, dropped}
local n = tonumber(ARGV[1])
if redis.call('LINDEX', KEYS[1], 0) == ARGV[2] and redis.call('LINDEX', KEYS[1], n - 1) == ARGV[3] then
  redis.call('LTRIM', KEYS[1], n, -1)
  redis.call('INCRBY', KEYS[2], n)
  return {OK, n}
end
return {OK, 0}
