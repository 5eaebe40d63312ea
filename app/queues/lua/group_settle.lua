-- After a select (or an end), a resource group's slots settled (app/queues/resource_groups.py): a reservation's
-- slots become the requests the select took (held until they end), the rest are given back, and ended requests
-- (those the select ended among them) free theirs. When slots were freed below the cap, the places whose selects it refused are woken.
-- KEYS: held, reserved, blocked, capped
-- ARGV: reservation, slots, max_in_flight, holding; per held: member; per released: member
-- INCLUDES: groups
-- reservation: '' for none; max_in_flight: 0 for no cap; holding: how many members to hold follow.
-- Returns {OK, in flight after}.
local held, reserved, blocked, capped = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local reservation, slots, max, holding = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local now = now_ms()
if slots > 0 then
  local names = {}
  for i = 1, slots do names[i] = reservation .. ':' .. i end
  in_chunks('ZREM', reserved, names)
end
local members, released = {}, 0
for i = 5, 4 + holding do append_pair(members, now, ARGV[i]) end
in_chunks('ZADD', held, members)
for i = 5 + holding, #ARGV do released = released + redis.call('ZREM', held, ARGV[i]) end
local count = redis.call('ZCARD', held) + redis.call('ZCARD', reserved)
local freed = released + slots - holding
if freed > 0 and (max == 0 or count < max) then
  uncapped(capped, now)
  local channels = redis.call('SMEMBERS', blocked)
  if #channels > 0 then
    redis.call('DEL', blocked)
    for _, channel in ipairs(channels) do redis.call('PUBLISH', channel, freed) end
  end
end
return {OK, count}
