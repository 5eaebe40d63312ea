-- Resource groups (app/queues/resource_groups.py): a group's slots granted (group_take.lua, and a select on one
-- Redis), settled (group_settle.lua, and a select or an end on one Redis), and the time its work waited on its cap.
-- INCLUDES: base

-- The group no longer capped: the time since it was counted in `total_ms`. `since`: the field as the caller read it
-- (false: absent), or nil to read it here.
local function uncapped(capped_key, now, since)
  if since == nil then since = redis.call('HGET', capped_key, 'since') end
  if since then
    redis.call('HINCRBY', capped_key, 'total_ms', now - tonumber(since))
    redis.call('HDEL', capped_key, 'since')
  end
end

-- A group's reserved slots: one member per select's reservation, `<reservation>:<slots>`, whose score is when it
-- lapses, and their sum kept in `capped`'s field `reserved` (a member per slot cost a batched select hundreds of ZADDs
-- and ZREMs, and summing the members every call cost a single select as much). Lapsed ones are dropped here first;
-- with no slot reserved there is no member to look at (a select settled in its own call reserves none). `sum`: the
-- field as the caller read it. Returns the slots reserved and those that lapsed.
local function reserved_slots(reserved, capped, now, sum)
  sum = tonumber(sum or 0)
  if sum == 0 then return 0, 0 end
  local lapsed = redis.call('ZRANGEBYSCORE', reserved, '-inf', now)
  if #lapsed > 0 then
    local slots = 0
    for _, member in ipairs(lapsed) do slots = slots + tonumber(string.match(member, ':(%d+)$')) end
    redis.call('ZREMRANGEBYSCORE', reserved, '-inf', now)
    return redis.call('HINCRBY', capped, 'reserved', -slots), slots
  end
  return sum, 0
end

-- Per group, its keys from KEYS `first_key` on (held, reserved, blocked, capped each) and its max_in_flight (0: no
-- cap) from ARGV `first_max` on; with what a call does to it: `granted` (and `asked`, `count` before, `uncapped` by
-- the grant), members to `hold`, members to `release` and how many of them were `released`.
local function group_places(first_key, count, first_max)
  local places = {}
  for g = 1, count do
    local at = first_key + 4 * (g - 1)
    places[g] = {held = KEYS[at], reserved = KEYS[at + 1], blocked = KEYS[at + 2], capped = KEYS[at + 3],
      max = tonumber(ARGV[first_max + g - 1]), granted = 0, released = 0, hold = {}, release = {}}
  end
  return places
end

-- Up to `want` slots of a group for a select (group_take.lua reserves them; a select on one Redis uses them in the
-- same call): returns them and the group's count before, which `place` keeps for settled in the same call, with the
-- slots of the reservations that `lapsed` (a dead process's: freed here).
local function grant(place, want, now)
  local fields = redis.call('HMGET', place.capped, 'reserved', 'since')
  local reserving, lapsed = reserved_slots(place.reserved, place.capped, now, fields[1])
  local count = redis.call('ZCARD', place.held) + reserving
  place.lapsed = lapsed
  local granted = want
  if place.max > 0 then granted = math.max(0, math.min(want, place.max - count)) end
  if granted == want then
    uncapped(place.capped, now, fields[2])
    place.uncapped = true
  end
  place.count = count
  return granted, count
end

-- A group's slots after a select or an end: its `hold` members held from now, and `freed` slots (given back or
-- released) wake the places its cap refused if it is under its cap. `short`: the notify channel of a select that left
-- work of the group for lack of slots (nil for none): it is listed to be woken when a slot is freed, and the time
-- counts as the group's work waiting on its cap; or, when slots were freed meanwhile (another select's, between its
-- take and this settle), woken at once. (A select is not listed for a group whose work it did not find: two servers
-- of one place, one refused while the other held the slots, would wake each other for nothing, again and again.)
-- `reserving`: its reserved slots after, when the caller knows them. Returns its count after when it freed any, is
-- `counted` or `short`.
local function settled(place, freed, reserving, now, counted, short)
  local members = {}
  for _, member in ipairs(place.hold) do append_pair(members, now, member) end
  in_chunks('ZADD', place.held, members)
  if freed <= 0 and not counted and not short then return nil end
  local count
  if place.count then
    -- Granted in this call: its count then, and what the call held since (its ends were freed before the grant).
    count = place.count + #place.hold
  else
    -- Lapsed reservations still count here (over the truth, not under) until the next take drops them.
    reserving = reserving or tonumber(redis.call('HGET', place.capped, 'reserved') or 0)
    count = redis.call('ZCARD', place.held) + reserving
  end
  local under = place.max == 0 or count < place.max
  if freed > 0 and under then
    if not place.uncapped then uncapped(place.capped, now) end
    local channels = redis.call('SMEMBERS', place.blocked)
    if #channels > 0 then
      redis.call('DEL', place.blocked)
      for _, channel in ipairs(channels) do redis.call('PUBLISH', channel, freed) end
    end
  end
  if short then
    if under then
      redis.call('PUBLISH', short, 1)
    else
      redis.call('SADD', place.blocked, short)
      redis.call('HSETNX', place.capped, 'since', now)
    end
  end
  return count
end

-- A request's member in its group (member_of in app/queues/resource_groups.py): one delivery of one life of it.
local function group_member(member_prefix, id, meta)
  return string.format('%s%s|%d|%d', member_prefix, id, meta.life or 1, meta.deliveries or 0)
end

-- On one Redis a select or an end frees the slots of the requests it ends in the same call (select_work,
-- end_grouped.lua). Returns the function end_held calls with each request it ended: its member goes on its group's
-- `release`. ARGV: the classes'
-- names from `first_class` on and their groups' numbers (0: none) from `first_group` on, `count` of each.
local function releasing(places, member_prefix, first_class, first_group, count)
  local by_class = {}
  for i = 0, count - 1 do
    local place = places[tonumber(ARGV[first_group + i])]
    if place then by_class[ARGV[first_class + i]] = place end
  end
  return function(id, meta)
    local place = by_class[meta.sc]
    if place then place.release[#place.release + 1] = group_member(member_prefix, id, meta) end
  end
end

-- The members on each group's `release` freed now: counted in `released`.
local function release_ended(places)
  for _, place in ipairs(places) do place.released = place.released + in_chunks('ZREM', place.held, place.release) end
end
