-- days.lua: buckets of natural periods (days; weeks.lua and months.lua
-- count theirs the same way), a part of count.lua. Kind days. Bit 32 in
-- the dedupe set.
--
-- key   pfreq:{<tag>}:days  Hash, field = the period's index in its zone
-- a[1]  the current period's index
-- a[2]  keep K: the periods a write keeps (the longest its caps read)
-- a[3]  span N (1..K): the periods whose sum is returned, this one included
-- a[4]  milliseconds until the K-th period from this one ends (> 0): the
--       hash's TTL
-- a[5]  "q": a quiet write, no sum (returns {0})
--
-- hits 0 reads (the event was counted before). Returns {sum}: the sum of
-- fields i-N+1..i after the hits.
parts.days = {bit = 32, run = function(key, hits, a)
  -- Numbers only where arithmetic needs them (see count.lua).
  if hits > 0 then
    local first = redis.call('HINCRBY', key, a[1], hits == 1 and '1' or hits) == hits
    if first then redis.call('PEXPIRE', key, a[4]) end
    if first and redis.call('HLEN', key) > tonumber(a[2]) then
      local oldest = tonumber(a[1]) - tonumber(a[2]) + 1
      for _, f in ipairs(redis.call('HKEYS', key)) do
        if tonumber(f) < oldest then redis.call('HDEL', key, f) end
      end
    end
  end
  if a[5] == 'q' then return {0} end
  local i, n = tonumber(a[1]), tonumber(a[3])
  local fields = {}
  for j = 1, n do fields[j] = i - n + j end
  local sum = 0
  for _, v in ipairs(redis.call('HMGET', key, unpack(fields))) do
    if v then sum = sum + tonumber(v) end
  end
  return {sum}
end}
