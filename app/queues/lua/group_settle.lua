-- After a select (or an end), resource groups' slots settled (app/queues/resource_groups.py), per group: a
-- reservation's slots become the requests the select took (held until they end), the rest are given back, and
-- ended requests (those the select ended among them) free theirs. When slots were freed below the cap, the places
-- whose selects it refused are woken; a select that left the group's work for lack of slots is listed (or, slots
-- having been freed meanwhile, woken). On a Redis Cluster each call settles one group's; on one Redis, all of a
-- select's.
-- KEYS: per group: held, reserved, blocked, capped
-- ARGV: per group: reservation, slots, max_in_flight, holding, releasing, short; per member: member
-- INCLUDES: groups
-- reservation: '' for none; max_in_flight: 0 for no cap; short: the notify channel of the select when it left the
-- group's work for lack of slots ('' when not). The members follow the groups' values: per group in order, its
-- `holding` members to hold, then its `releasing` members to free.
-- Returns {OK, per group: in flight after}.
local groups = #KEYS / 4
local member = 1 + 6 * groups
local result = {OK}
local now = now_ms()
for g = 1, groups do
  local at = 6 * g - 5
  local place = group_places(4 * g - 3, 1, at + 2)[1]
  local reservation, slots = ARGV[at], tonumber(ARGV[at + 1])
  local holding, releasing = tonumber(ARGV[at + 3]), tonumber(ARGV[at + 4])
  local reserving
  if slots > 0 and redis.call('ZREM', place.reserved, reservation .. ':' .. slots) == 1 then
    reserving = redis.call('HINCRBY', place.capped, 'reserved', -slots)
  end
  for i = member, member + holding - 1 do place.hold[#place.hold + 1] = ARGV[i] end
  member = member + holding
  for i = member, member + releasing - 1 do place.release[#place.release + 1] = ARGV[i] end
  member = member + releasing
  release_ended({place})
  local short = ARGV[at + 5] ~= '' and ARGV[at + 5] or nil
  result[#result + 1] = settled(place, place.released + slots - holding, reserving, now, true, short)
end
return result
