-- The scheduler election (after TIBCO Rendezvous): every member calls this each heartbeat (leaving it: resign.lua).
-- KEYS: members, holder
-- ARGV: member, weight, activation_ms, info
-- INCLUDES: base
-- members: hash member -> JSON {weight, seen, info}; holder: hash member, weight, epoch, renewed, since; one hash
-- tag. info: JSON of the member's host and pid.
-- Returns {active (1 or 0), epoch, holder ('' for none), what happened: took | kept | yielded | standby}.
-- The epoch is the fencing token: it grows by one with every new holder. Time is Redis's (now_ms), so members'
-- clocks do not matter.
local members, holder = KEYS[1], KEYS[2]
local me, weight, activation, info = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4]
local now = now_ms()
local current = redis.call('HMGET', holder, 'member', 'renewed', 'epoch')
local epoch = tonumber(current[3] or 0)

redis.call('HSET', members, me, cjson.encode({weight = weight, seen = now, info = info}))
-- The live member of the highest weight (then the lowest name); members silent for ten intervals are forgotten.
local best, best_weight = nil, -1
local all = redis.call('HGETALL', members)
for i = 1, #all, 2 do
  local member = cjson.decode(all[i + 1])
  if now - member.seen > 10 * activation then
    redis.call('HDEL', members, all[i])
  elseif now - member.seen <= activation and (member.weight > best_weight or (member.weight == best_weight and all[i] < best)) then
    best, best_weight = all[i], member.weight
  end
end

if current[1] == me then
  if best_weight > weight then
    -- A heavier member is live: hand over (it takes the role at its next heartbeat).
    redis.call('HDEL', holder, 'member', 'weight', 'renewed', 'since')
    return {0, epoch, '', 'yielded'}
  end
  redis.call('HSET', holder, 'renewed', now)
  return {1, epoch, me, 'kept'}
end
if current[1] and now - tonumber(current[2]) <= activation then
  return {0, epoch, current[1], 'standby'}
end
if best == me then
  epoch = redis.call('HINCRBY', holder, 'epoch', 1)
  redis.call('HSET', holder, 'member', me, 'weight', weight, 'renewed', now, 'since', now)
  return {1, epoch, me, 'took'}
end
return {0, epoch, current[1] or '', 'standby'}
