-- months.lua: buckets of calendar months, a part of count.lua. Kind
-- months. Bit 128 in the dedupe set.
--
-- key   pfreq:{<tag>}:months  Hash, field = year * 12 + month - 1 in its zone
-- a     as days.lua's
--
-- Counted as days.lua counts (its run), under a bit of its own.
parts.months = {bit = 128, nargs = 4, run = function(key, hits, o, ids, quiet) return parts.days.run(key, hits, o, ids, quiet) end}
