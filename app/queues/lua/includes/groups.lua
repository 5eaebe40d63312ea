-- Resource groups (group_take.lua, group_settle.lua): the time a group's work waited on its cap ends here.
-- INCLUDES: base

local function uncapped(capped_key, now)
  local since = redis.call('HGET', capped_key, 'since')
  if since then
    redis.call('HINCRBY', capped_key, 'total_ms', now - tonumber(since))
    redis.call('HDEL', capped_key, 'since')
  end
end
