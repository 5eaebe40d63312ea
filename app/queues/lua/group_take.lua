-- Slots of resource groups taken for one select (app/queues/resource_groups.py), before the select runs in its
-- environment's slot (another slot on a cluster): per group, up to `want`, within the group's max in flight. They are
-- reserved (one member: reserved_slots in includes/groups.lua) until `hold ms` from now, which group_settle.lua turns
-- into held requests or gives back; a process that dies between the two leaves its reservations to lapse (a
-- completion time), and the scheduler's pass holds the work it selected meanwhile before they do (unheld_members in
-- app/queues/resource_groups.py). On a Redis Cluster each call takes one group's (its keys share a slot); on one
-- Redis, every group of the select in one call, where a group has a min_in_flight (select_grouped.lua otherwise).
-- KEYS: per group: held, reserved, blocked, capped
-- ARGV: want, reservation, hold_ms; per group: max_in_flight
-- INCLUDES: groups
-- max_in_flight: 0 for no cap.
-- Returns {OK, per group: granted, in flight before}. A select that leaves a group's work for lack of slots is listed
-- by its settle (group_settle.lua), once it knows.
local want, reservation, hold_ms = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3])
local now = now_ms()
local result = {OK}
for _, place in ipairs(group_places(1, #KEYS / 4, 4)) do
  local granted, count = grant(place, want, now)
  if granted > 0 then
    redis.call('ZADD', place.reserved, now + hold_ms, reservation .. ':' .. granted)
    redis.call('HINCRBY', place.capped, 'reserved', granted)
  end
  result[#result + 1] = granted
  result[#result + 1] = count
end
return result
