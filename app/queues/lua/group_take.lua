-- Slots of resource groups taken for one select (app/queues/resource_groups.py), before the select runs in its
-- environment's slot (another slot on a cluster): per group, up to `want`, within the group's max in flight. They are
-- reserved (one member: reserved_slots in includes/groups.lua) until `hold ms` from now, which group_settle.lua turns
-- into held requests or gives back; a process that dies between the two leaves its reservations to lapse (a
-- completion time), and the scheduler's pass holds the work it selected meanwhile before they do (unheld_members in
-- app/queues/resource_groups.py). On a Redis Cluster each call takes one group's (its keys share a slot); on one
-- Redis, every group of the select in one call.
-- KEYS: per group: held, reserved, blocked, capped
-- ARGV: want, reservation, hold_ms, channel; per group: max_in_flight
-- INCLUDES: groups
-- max_in_flight: 0 for no cap; channel: the notify channel of the place asking.
-- Returns {OK, per group: granted, in flight before}. A place granted less than it wanted is woken when a slot of
-- that group is freed.
local want, reservation, hold_ms, channel = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3]), ARGV[4]
local now = now_ms()
local result = {OK}
for g = 1, #KEYS / 4 do
  local held, reserved, blocked, capped = KEYS[4 * g - 3], KEYS[4 * g - 2], KEYS[4 * g - 1], KEYS[4 * g]
  local max = tonumber(ARGV[4 + g])
  local count = redis.call('ZCARD', held) + reserved_slots(reserved, capped, now)
  local granted = want
  if max > 0 then granted = math.max(0, math.min(want, max - count)) end
  if granted > 0 then
    redis.call('ZADD', reserved, now + hold_ms, reservation .. ':' .. granted)
    redis.call('HINCRBY', capped, 'reserved', granted)
  end
  if granted < want then
    redis.call('SADD', blocked, channel)
    redis.call('HSETNX', capped, 'since', now)
  else
    uncapped(capped, now)
  end
  result[#result + 1] = granted
  result[#result + 1] = count
end
return result
