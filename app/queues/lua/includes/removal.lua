-- A queued request's removal (delete_queued.lua, purge_queued.lua, delete_swept.lua).
-- INCLUDES: finish, places

-- A queued request (in memory or swept) is deleted or purged: its entry in a list stays until a select or sweep drops
-- it (deleting from a list's middle is O(n)), and its place is a hole (includes/places.lua). k needs req, payload,
-- depth, records, exits, done, tombs, holes.
local function remove_queued(k, id, meta, outcome, now, tombstone_ms)
  redis.call('HINCRBY', k.depth, meta.sc, -1)
  leave_hole(k.holes, id, meta)
  return finish(k, id, meta, outcome, now, tombstone_ms)
end
