-- week.lua: a campaign's natural week (String + TTL to the week's end), a
-- part of count.lua. Kind week. Bit 4 in the dedupe set.
--
-- key   freq:{<tag>}:week
-- a[1]  milliseconds until the week ends (> 0)
--
-- Counted as window.lua counts (its run), under a bit of its own.
parts.week = {bit = 4, run = function(key, hits, a) return parts.window.run(key, hits, a) end}
