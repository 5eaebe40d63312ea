-- Select work for a server and begin it at once, its classes' resource groups taken and settled in the same call:
-- as select_grouped.lua, with the same KEYS, ARGV and returns, each selected request begun when it is selected.
-- KEYS, ARGV: as select_grouped.lua
-- INCLUDES: select_work
return select_work(true, true)
