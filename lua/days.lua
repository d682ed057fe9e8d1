-- days.lua: buckets of natural periods (days; weeks.lua and months.lua
-- count theirs the same way), a part of count.lua. Kind days. Bit 32 in
-- the dedupe set.
--
-- key   pfreq:{<tag>}:days  Hash, field = the period's index in its zone
-- ARGV[o+1]  the current period's index
-- ARGV[o+2]  keep K: the periods a write keeps (the longest its caps read)
-- ARGV[o+3]  span N (1..K): the periods whose sum is returned, this one included
-- ARGV[o+4]  milliseconds until the K-th period from this one ends (> 0): the
--       hash's TTL
--
-- hits 0 reads (the event was counted before). Returns {sum}: the sum of
-- fields i-N+1..i after the hits; nothing when quiet (no sum is made).
-- digit[d] is the digit d: a window's fields are named from the current
-- period's own string (ARGV[o+1]) a digit at a time, where a number made a
-- string costs about 7,000 instructions (Lua's sprintf).
local digit = {[0] = '0', '1', '2', '3', '4', '5', '6', '7', '8', '9'}
parts.days = {bit = 32, nargs = 4, run = function(key, hits, o, ids, quiet)
  -- Numbers only where arithmetic needs them (see count.lua).
  if hits > 0 then
    local first = redis.call('HINCRBY', key, ARGV[o + 1], hits == 1 and '1' or hits) == hits
    if first then redis.call('PEXPIRE', key, ARGV[o + 4]) end
    if first and redis.call('HLEN', key) > tonumber(ARGV[o + 2]) then
      local oldest = tonumber(ARGV[o + 1]) - tonumber(ARGV[o + 2]) + 1
      for _, f in ipairs(redis.call('HKEYS', key)) do
        if tonumber(f) < oldest then redis.call('HDEL', key, f) end
      end
    end
  end
  if quiet then return end
  local i, n = tonumber(ARGV[o + 1]), tonumber(ARGV[o + 3])
  local sum = 0
  -- A window of more than 4 periods reads the whole hash when it holds
  -- fewer fields than the window has (a device's few hours of a day), and
  -- names its fields otherwise (a hot counter's every hour): HMGET of
  -- each, named a digit at a time (digit, above).
  if n > 4 and redis.call('HLEN', key) < n then
    local h = redis.call('HGETALL', key)
    for x = 1, #h, 2 do
      local f = tonumber(h[x])
      if f and f > i - n and f <= i then sum = sum + tonumber(h[x + 1]) end
    end
    return {sum}
  end
  local fields = {}
  if i - n + 1 >= 10 then
    -- Down from the current period's string: its last digit taken down,
    -- the rest made anew once every ten periods. (The lowest field has
    -- two digits at least, so the rest never runs out.)
    local s = ARGV[o + 1]
    local rest, d = string.sub(s, 1, -2), string.byte(s, -1) - 48
    fields[n] = s
    for j = n - 1, 1, -1 do
      if d == 0 then
        rest, d = (tonumber(rest) - 1) .. '', 9
      else
        d = d - 1
      end
      fields[j] = rest .. digit[d]
    end
  else
    for j = 1, n do fields[j] = i - n + j end
  end
  for _, v in ipairs(redis.call('HMGET', key, unpack(fields))) do
    if v then sum = sum + tonumber(v) end
  end
  return {sum}
end}
