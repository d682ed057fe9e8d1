-- limit.lua: one rate-limit check against one or more limits on
-- keys of one hash tag, all or nothing: the hit is admitted when every
-- limit admits it, and only then does any of them consume. The kinds'
-- functions (kinds.<name>, one file each) and this file are in the Redis
-- Functions library (lua.Library) with count.lua: KEYS and ARGV are each
-- call's. Each kind answers a hit without writing and returns the write
-- to do when it admits.
--
-- KEYS[i] the key of limit i
-- ARGV[1] now, unix ms
-- ARGV[2] cost (0 = peek: what a hit of cost 1 would get, its decision,
--         retry-after and delay, with remaining and reset as they are;
--         nothing is consumed)
-- ARGV[3] grace, ms: keys live this long past the instant they stop
--         mattering, for counter instances whose clocks lag
-- ARGV[4+5(i-1) ..] limit i: kind, limit, period ms, param (burst,
--         capacity; 0 when none), x (the kind's own argument)
--
-- KEYS[n+1] optional: a counter (String) that an admitted hit increments
--         by cost (the view counter's total); its value is returned last.
--
-- Returns {allowed, then for each limit: allowed, remaining, retryAfterUs
-- (-1: never, the cost is above what it holds), resetAfterUs, delayUs,
-- then the counter's value when there is one}. When one limit refuses,
-- the others answer as a peek (cost 0) would.
-- (a cost of 1, the usual, is compared as it comes: tonumber costs about
-- 2,000 instructions)
local now, cost, grace = tonumber(ARGV[1]), ARGV[2] == '1' and 1 or tonumber(ARGV[2]), tonumber(ARGV[3])
local n = (#ARGV - 3) / 5
local answers, writes, all = {}, {}, 1
for i = 1, n do
  local a = 3 + (i - 1) * 5
  local r, w = kinds[ARGV[a + 1]](KEYS[i], now, cost, tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3]), tonumber(ARGV[a + 4]), ARGV[a + 5], grace)
  if cost == 0 then
    local hit = kinds[ARGV[a + 1]](KEYS[i], now, 1, tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3]), tonumber(ARGV[a + 4]), ARGV[a + 5], grace)
    r, w = {hit[1], r[2], hit[3], r[4], hit[5]}, nil
  end
  answers[i], writes[i] = r, w
  if r[1] == 0 then all = 0 end
end
local out = {all}
for i = 1, n do
  local r = answers[i]
  if all == 1 then
    if writes[i] then writes[i]() end
  elseif r[1] == 1 then
    local a = 3 + (i - 1) * 5
    r = kinds[ARGV[a + 1]](KEYS[i], now, 0, tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3]), tonumber(ARGV[a + 4]), ARGV[a + 5], grace)
  end
  for j = 1, 5 do out[#out + 1] = r[j] end
end
if #KEYS > n then
  if all == 1 and cost > 0 then
    out[#out + 1] = redis.call('INCRBY', KEYS[n + 1], cost)
  else
    out[#out + 1] = tonumber(redis.call('GET', KEYS[n + 1]) or '0')
  end
end
return out
