-- weeks.lua: buckets of natural weeks (Monday to Sunday), a part of
-- count.lua. Kind weeks. Bit 64 in the dedupe set.
--
-- key   pfreq:{<tag>}:weeks  Hash, field = the week's index in its zone
-- a     as days.lua's
--
-- Counted as days.lua counts (its run), under a bit of its own.
parts.weeks = {bit = 64, nargs = 4, run = function(key, hits, o, ids, quiet) return parts.days.run(key, hits, o, ids, quiet) end}
