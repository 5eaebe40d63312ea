-- After a select (or an end), resource groups' slots settled (app/queues/resource_groups.py), per group: a
-- reservation's slots become the requests the select took (held until they end), the rest are given back, and
-- ended requests (those the select ended among them) free theirs. When slots were freed below the cap, the places
-- whose selects it refused are woken. On a Redis Cluster each call settles one group's; on one Redis, all of a select's.
-- KEYS: per group: held, reserved, blocked, capped
-- ARGV: per group: reservation, slots, max_in_flight, holding, releasing; per member: member
-- INCLUDES: groups
-- reservation: '' for none; max_in_flight: 0 for no cap. The members follow the groups' values: per group in order,
-- its `holding` members to hold, then its `releasing` members to free.
-- Returns {OK, per group: in flight after}.
local groups = #KEYS / 4
local member = 1 + 5 * groups
local result = {OK}
local now = now_ms()
for g = 1, groups do
  local held, reserved, blocked, capped = KEYS[4 * g - 3], KEYS[4 * g - 2], KEYS[4 * g - 1], KEYS[4 * g]
  local at = 5 * g - 4
  local reservation, slots, max = ARGV[at], tonumber(ARGV[at + 1]), tonumber(ARGV[at + 2])
  local holding, releasing = tonumber(ARGV[at + 3]), tonumber(ARGV[at + 4])
  local reserving
  if slots > 0 and redis.call('ZREM', reserved, reservation .. ':' .. slots) == 1 then
    reserving = redis.call('HINCRBY', capped, 'reserved', -slots)
  end
  local members, gone = {}, {}
  for i = member, member + holding - 1 do append_pair(members, now, ARGV[i]) end
  in_chunks('ZADD', held, members)
  member = member + holding
  for i = member, member + releasing - 1 do gone[#gone + 1] = ARGV[i] end
  local released = in_chunks('ZREM', held, gone)
  member = member + releasing
  -- Lapsed reservations still count here (over the truth, not under) until the next take drops them.
  reserving = reserving or tonumber(redis.call('HGET', capped, 'reserved') or 0)
  local count = redis.call('ZCARD', held) + reserving
  local freed = released + slots - holding
  if freed > 0 and (max == 0 or count < max) then
    uncapped(capped, now)
    local channels = redis.call('SMEMBERS', blocked)
    if #channels > 0 then
      redis.call('DEL', blocked)
      for _, channel in ipairs(channels) do redis.call('PUBLISH', channel, freed) end
    end
  end
  result[#result + 1] = count
end
return result
