-- release.lua: the end of an in-flight bid, a part of count.lua. Kind
-- release. Bit 512 in the dedupe set.
--
-- key   rsv:{<tag>}  reserve.lua's ZSet
-- a[1]  now, unix ms
-- a[2]  the bid id
--
-- Counted with the bid's win in the same run (the win's event id is the
-- bid id): the reservation becomes a count exactly once. A loss or a win
-- without a reservation removes nothing. Returns {n}: the reservations
-- live after it.
parts.release = {bit = 512, run = function(key, hits, a)
  if hits > 0 then redis.call('ZREM', key, a[2]) end
  return {redis.call('ZCOUNT', key, '(' .. a[1], '+inf')}
end}
