-- hours.lua: hour buckets, a part of count.lua. Kind hours. Bit 2 in the
-- dedupe set.
--
-- key   hfreq:{<tag>}  Hash, field = epoch hour
-- a[1]  current epoch hour (unix seconds / 3600)
-- a[2]  retention R in hours: the counter's largest window. Every writer
--       keeps R+1 hours, whatever window it counts for.
-- a[3]  span N in hours (1..R): the window whose sum is returned
--
-- hits 0 reads (the event was counted before). Returns {sum}: the sum of
-- fields h-N+1..h after the hits.
parts.hours = {bit = 2, run = function(key, hits, a)
  local hour, keep, n = tonumber(a[1]), tonumber(a[2]), tonumber(a[3])
  if hits > 0 then
    local first = redis.call('HINCRBY', key, hour, hits) == hits
    redis.call('PEXPIRE', key, (keep + 1) * 3600000)
    -- Keep at most R+1 fields: drop the hours that left the retention.
    -- Only a new hour field can push the hash past that, so only then look.
    if first and redis.call('HLEN', key) > keep + 1 then
      local oldest = hour - keep
      for _, f in ipairs(redis.call('HKEYS', key)) do
        if tonumber(f) < oldest then redis.call('HDEL', key, f) end
      end
    end
  end
  local fields = {}
  for i = 1, n do fields[i] = hour - n + i end
  local sum = 0
  for _, v in ipairs(redis.call('HMGET', key, unpack(fields))) do
    if v then sum = sum + tonumber(v) end
  end
  return {sum}
end}
