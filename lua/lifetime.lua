-- lifetime.lua: a campaign's lifetime (String + TTL to the campaign's end),
-- a part of count.lua. Kind lifetime. Bit 16 in the dedupe set.
--
-- key   freq:{<tag>}:lifetime
-- ARGV[o+1]  milliseconds until the campaign ends (> 0)
--
-- Counted as window.lua counts (its run), under a bit of its own.
parts.lifetime = {bit = 16, nargs = 1, run = function(key, hits, o, ids, quiet) return parts.window.run(key, hits, o, ids, quiet) end}
