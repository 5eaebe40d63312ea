-- Select work for a server and begin it at once (IWM4SSL then IWM4STBG in one step): as select.lua, with the
-- same KEYS, ARGV and returns, each selected request begun when it is selected.
-- KEYS, ARGV: as select.lua
-- INCLUDES: select_work
return select_work(true)
