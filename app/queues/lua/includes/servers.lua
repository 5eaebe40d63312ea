-- An environment's servers on one node (status.lua, delay_figures.lua): how many are registered, their worker tasks
-- and the requests they hold.

-- k needs servers, inflight.
local function servers_and_held(k)
  local servers, tasks, held = 0, 0, 0
  local registered = redis.call('HGETALL', k.servers)
  for i = 2, #registered, 2 do
    servers = servers + 1
    tasks = tasks + cjson.decode(registered[i]).tasks
  end
  for _, count in ipairs(redis.call('HVALS', k.inflight)) do held = held + tonumber(count) end
  return servers, tasks, held
end
