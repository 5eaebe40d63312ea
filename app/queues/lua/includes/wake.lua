-- Waking long-polling servers when work comes (insert.lua, dead_retry.lua, give_back, select_work).
-- INCLUDES: base

-- Long-polling servers that found nothing wait listed in KEYS waiters (a sorted set of
-- `<process>[@<primary>]:<waiter>`, best first: non-overflow before overflow, higher worker weight first, then the
-- least recently served: round robin among equals), so that new work wakes the servers it is for in the process that
-- holds them, and no other process runs a select for nothing. `served_at`: when the server was last given work (ms;
-- 0 for never).
local function wake_rank(server, served_at)
  local rank = (server.overflow and 1001 or 0) + 1000 - (server.weight or 1)
  return rank + (served_at % 1e9) / 1e9  -- (it wraps every 11 days: a moment's unfairness)
end

-- Wakes up to `count` servers for new work of `channel`'s environment and node: the best listed waiters, through
-- their processes' channels (`wake_prefix` .. the member's part before its last colon: on a cluster the process's
-- channel on the primary it listed the waiter on, app/work/long_poll.py). The share of a process not listening here
-- goes to `channel`, which every process hears (and wakes its best free waiter for). Work beyond the listed waiters
-- wakes nobody: a long poll that found nothing is listed by the same script call, so every server waiting for work
-- is listed (a server busy at capacity, or selecting now, takes its next work when it next selects).
local function wake(waiters_key, channel, wake_prefix, count)
  local listed = redis.call('ZPOPMIN', waiters_key, count)
  local per_process, processes = {}, {}
  for i = 1, #listed, 2 do
    local process, waiter = string.match(listed[i], '^(.+):([^:]+)$')
    if per_process[process] == nil then
      per_process[process] = {}
      processes[#processes + 1] = process
    end
    table.insert(per_process[process], waiter)
  end
  local unwoken = 0
  for _, process in ipairs(processes) do
    local waiters = per_process[process]
    if redis.call('PUBLISH', wake_prefix .. process, table.concat(waiters, ' ') .. '\n' .. channel) == 0 then
      unwoken = unwoken + #waiters
    end
  end
  if unwoken > 0 then
    redis.call('PUBLISH', channel, unwoken)
  end
end

