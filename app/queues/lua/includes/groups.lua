-- Resource groups (group_take.lua, group_settle.lua): the time a group's work waited on its cap ends here.
-- INCLUDES: base

local function uncapped(capped_key, now)
  local since = redis.call('HGET', capped_key, 'since')
  if since then
    redis.call('HINCRBY', capped_key, 'total_ms', now - tonumber(since))
    redis.call('HDEL', capped_key, 'since')
  end
end

-- A group's reserved slots: one member per select's reservation, `<reservation>:<slots>`, whose score is when it
-- lapses; the live ones are as many as the selects under way, so summing them is cheap. (A member per slot cost a
-- batched select hundreds of ZADDs and ZREMs.)
local function reserved_slots(reserved, now)
  local slots = 0
  for _, member in ipairs(redis.call('ZRANGEBYSCORE', reserved, now, '+inf')) do
    slots = slots + tonumber(string.match(member, ':(%d+)$'))
  end
  return slots
end
