-- hours.lua: hour buckets, a part of count.lua. Kind hours. Bit 2 in the
-- dedupe set.
--
-- key   hfreq:{<tag>}  Hash, field = epoch hour
-- a[1]  current epoch hour (unix seconds / 3600)
-- a[2]  retention R in hours: the counter's largest window. Every writer
--       keeps R+1 hours, whatever window it counts for.
-- a[3]  span N in hours (1..R): the window whose sum is returned
-- a[4]  "q": a quiet write, no sum (returns {0})
--
-- hits 0 reads (the event was counted before). Returns {sum}: the sum of
-- fields h-N+1..h after the hits.
-- Hour buckets are period buckets (days.lua) that keep R+1 hours and
-- live that long.
parts.hours = {bit = 2, run = function(key, hits, a)
  local keep = tonumber(a[2]) + 1
  return parts.days.run(key, hits, {a[1], keep, a[3], keep * 3600000, a[4]})
end}
