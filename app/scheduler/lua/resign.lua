-- A member leaves the scheduler election (it stops); a holder gives the role up at once, so another member takes it
-- at its next heartbeat rather than after the activation interval.
-- KEYS: members, holder
-- ARGV: member
-- Returns {0, epoch, holder ('' for none), what happened: resigned | standby}.
local members, holder = KEYS[1], KEYS[2]
local me = ARGV[1]
local current = redis.call('HMGET', holder, 'member', 'epoch')
local epoch = tonumber(current[2] or 0)

redis.call('HDEL', members, me)
if current[1] == me then
  redis.call('HDEL', holder, 'member', 'weight', 'renewed', 'since')
  return {0, epoch, '', 'resigned'}
end
return {0, epoch, current[1] or '', 'standby'}
