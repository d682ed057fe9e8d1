-- month.lua: a campaign's calendar month (String + TTL to the month's end),
-- a part of count.lua. Kind month. Bit 8 in the dedupe set.
--
-- key   freq:{<tag>}:month
-- ARGV[o+1]  milliseconds until the month ends (> 0)
--
-- Counted as window.lua counts (its run), under a bit of its own.
parts.month = {bit = 8, nargs = 1, run = function(key, hits, o, ids, quiet) return parts.window.run(key, hits, o, ids, quiet) end}
