-- A server ends requests it holds, as end.lua, where some of its environment's classes are in resource groups, on one
-- Redis: the slots the ended requests held are freed in the same call, and the places their group's cap refused are
-- woken (includes/groups.lua). (On a Redis Cluster a group's keys are in a slot of their own: group_settle.lua after.)
-- KEYS: req, payload, leases, inflight, records, exits, done, done_0, done_1, done_2, done_3, samples, dead, dead_at,
--       buckets, histograms; per group: held, reserved, blocked, capped
-- ARGV: server, tombstone_ms, samples_ms, dead_keep_ms, ends, member_prefix; per end: id, outcome, result, error,
--       dead_letter, life, tombstone; per class: class; per class: group; per group: max_in_flight
-- INCLUDES: end_held, groups
-- member_prefix: a request's token up to its id (AeKeys.member_prefix). Per class its group's number (0: none);
-- max_in_flight: 0 for no cap. Returns as end.lua.
local k = {req = KEYS[1], payload = KEYS[2], leases = KEYS[3], inflight = KEYS[4], records = KEYS[5], exits = KEYS[6],
  done = KEYS[7], tombs = {KEYS[8], KEYS[9], KEYS[10], KEYS[11]}, samples = KEYS[12], dead = KEYS[13], dead_at = KEYS[14],
  buckets = KEYS[15], histograms = KEYS[16]}
local FIRST_GROUP_KEY = 17
local now, group_count = now_ms(), (#KEYS - FIRST_GROUP_KEY + 1) / 4
local first_class = 7 + END_ARITY * tonumber(ARGV[5])
local class_count = (#ARGV - first_class + 1 - group_count) / 2
local places = group_places(FIRST_GROUP_KEY, group_count, first_class + 2 * class_count)
local result = {OK}
local ended_one = releasing(places, ARGV[6], first_class, first_class + class_count, class_count)
end_held(k, ARGV[1], now, tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), 7, first_class - 1, result, ended_one)
release_ended(places)
for _, place in ipairs(places) do settled(place, place.released, nil, now) end
return result
