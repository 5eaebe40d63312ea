-- Slots of a resource group taken for one select (app/queues/resource_groups.py), before the select runs in its
-- environment's slot (another slot on a cluster): up to `want`, within the group's max in flight. Each is reserved
-- until `hold ms` from now, which group_settle.lua turns into held requests or gives back; a process that dies
-- between the two leaves its reservations to lapse (a completion time), and the scheduler's pass holds the work it
-- selected meanwhile before they do (unheld_members in app/queues/resource_groups.py).
-- KEYS: held, reserved, blocked, capped
-- ARGV: want, max_in_flight, reservation, hold_ms, channel
-- INCLUDES: groups
-- max_in_flight: 0 for no cap; channel: the notify channel of the place asking.
-- Returns {OK, granted, in flight before}. A place granted less than it wanted is woken when a slot is freed.
local held, reserved, blocked, capped = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local want, max, reservation, hold_ms, channel = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3], tonumber(ARGV[4]), ARGV[5]
local now = now_ms()
redis.call('ZREMRANGEBYSCORE', reserved, '-inf', now)
local count = redis.call('ZCARD', held) + redis.call('ZCARD', reserved)
local granted = want
if max > 0 then granted = math.max(0, math.min(want, max - count)) end
if granted > 0 then
  local slots = {}
  for i = 1, granted do append_pair(slots, now + hold_ms, reservation .. ':' .. i) end
  in_chunks('ZADD', reserved, slots)
end
if granted < want then
  redis.call('SADD', blocked, channel)
  redis.call('HSETNX', capped, 'since', now)
else
  uncapped(capped, now)
end
return {OK, granted, count}
