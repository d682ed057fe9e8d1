-- release.lua: the end of an in-flight bid, a part of count.lua. Kind
-- release. Bit 512 in the dedupe set.
--
-- key   rsv:{<tag>}  reserve.lua's ZSet
-- ARGV[o+1]  now, unix ms
-- ids   the bids it ends: the event ids of the run's wins that were
--       reserved (count.lua passes them; no argument names one, so the
--       wins of a hot counter share one run)
--
-- Counted with the bid's win in the same run (the win's event id is the
-- bid id): the reservation becomes a count exactly once. It needs reserve's
-- bit: for an event id never reserved on this tag (most wins) count.lua
-- does not run it (hits 0). Returns {n}: the reservations live after it
-- (down: each event of a shared run is answered with those live right
-- after it); nothing when quiet.
parts.release = {bit = 512, needs = 256, nargs = 1, ids = true, down = true, run = function(key, hits, o, ids, quiet)
  if hits > 0 then redis.call('ZREM', key, unpack(ids)) end
  if quiet then return end
  return {redis.call('ZCOUNT', key, '(' .. ARGV[o + 1], '+inf')}
end}
