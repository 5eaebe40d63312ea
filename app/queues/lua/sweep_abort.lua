-- The slow queue sweeper (app/sweeper, after TPF MQSeries') could not write its blob: the sweep it began ends, the queue as
-- it was (a mark of another sweep is left alone).
-- KEYS: req, payload, front, rear, chain, swept, sweeping, fence, places
-- ARGV: queue, token, epoch
-- INCLUDES: sweep
-- Returns {OK}, or {FENCED, epoch} when a newer scheduler acted on this queue.
local k = sweep_keys()
local queue, token = ARGV[1], ARGV[2]
local newer = fenced_by(k.fence, tonumber(ARGV[3]))
if newer then return {FENCED, newer} end
if own_sweep_mark(k, queue, token) then redis.call('HDEL', k.sweeping, queue) end
return {OK}
