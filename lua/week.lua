-- week.lua: a campaign's natural week (String + TTL to the week's end), a
-- part of count.lua. Kind week. Bit 4 in the dedupe set.
--
-- key   freq:{<tag>}:week
-- ARGV[o+1]  milliseconds until the week ends (> 0)
--
-- Counted as window.lua counts (its run), under a bit of its own.
parts.week = {bit = 4, nargs = 1, run = function(key, hits, o, ids, quiet) return parts.window.run(key, hits, o, ids, quiet) end}
