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
-- lapses, and their sum kept in `capped`'s field `reserved` (a member per slot cost a batched select hundreds of ZADDs
-- and ZREMs, and summing the members every call cost a single select as much). Lapsed ones are dropped here first.
local function reserved_slots(reserved, capped, now)
  local lapsed = redis.call('ZRANGEBYSCORE', reserved, '-inf', now)
  if #lapsed > 0 then
    local slots = 0
    for _, member in ipairs(lapsed) do slots = slots + tonumber(string.match(member, ':(%d+)$')) end
    redis.call('ZREMRANGEBYSCORE', reserved, '-inf', now)
    return redis.call('HINCRBY', capped, 'reserved', -slots)
  end
  return tonumber(redis.call('HGET', capped, 'reserved') or 0)
end
