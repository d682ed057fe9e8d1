-- release.lua: the end of an in-flight bid, a part of count.lua. Kind
-- release. Bit 512 in the dedupe set.
--
-- key   rsv:{<tag>}  reserve.lua's ZSet
-- a[1]  now, unix ms
-- a[2]  the bid id
-- a[3]  "q": a quiet write, no count of what is left (returns {0})
--
-- Counted with the bid's win in the same run (the win's event id is the
-- bid id): the reservation becomes a count exactly once. It needs reserve's
-- bit: for an event id never reserved on this tag (most wins) count.lua
-- does not run it (hits 0). Returns {n}: the reservations live after it.
parts.release = {bit = 512, needs = 256, run = function(key, hits, a)
  if hits > 0 then redis.call('ZREM', key, a[2]) end
  if a[3] == 'q' then return {0} end
  return {redis.call('ZCOUNT', key, '(' .. a[1], '+inf')}
end}
