-- token_bucket.lua: Guava's RateLimiter (SmoothBursty), computed lazily:
-- permits are refilled on access, one every period/limit (rounded down to
-- a microsecond), up to burst; no thread refills anything. A hit may take
-- more than is stored and the next caller pays the wait. Permits are
-- stored as the microseconds it takes to make them.
--
-- key   rl:{<tag>}:token_bucket:<limit>:<periodMs>:<burst>   Hash: s
--       (stored), n (next free, unix us); a new bucket is full
-- ARGV[o+1]  t, the interval between two permits in us: period/limit
--       rounded down
-- ARGV[o+2]  burst
-- ARGV[o+3]  '1' acquire (reserve, answer the delay), '0' tryAcquire
--       (refuse while an earlier reservation's wait runs)
-- tb_remaining is how many whole permits are stored, none while a wait
-- runs (a helper of the library: a closure costs about 1,000 instructions
-- a run).
local function tb_remaining(stored, nxt, now, t)
  if nxt > now then return 0 end
  return math.floor(stored / t)
end
kinds.token_bucket = {nargs = 3, run = function(key, now, cost, o, grace, commit)
  now = now * 1000
  local t, burst, x = tonumber(ARGV[o + 1]), tonumber(ARGV[o + 2]), ARGV[o + 3]
  local full = burst * t
  local h = redis.call('HMGET', key, 's', 'n')
  local stored, nxt = tonumber(h[1]) or full, tonumber(h[2]) or now
  if now > nxt then
    stored = math.min(full, stored + now - nxt)
    nxt = now
  end
  if x ~= '1' and nxt > now then return 0, 0, nxt - now, nxt - now + full - stored, 0 end
  if cost == 0 then return 1, tb_remaining(stored, nxt, now, t), 0, nxt - now + full - stored, 0 end
  local wait = nxt - now
  local take = math.min(cost * t, stored)
  nxt = nxt + cost * t - take
  stored = stored - take
  local reset = nxt - now + full - stored
  if commit then
    redis.call('HSET', key, 's', string.format('%.0f', stored), 'n', string.format('%.0f', nxt))
    redis.call('PEXPIRE', key, math.floor(reset / 1000) + grace)
  end
  return 1, tb_remaining(stored, nxt, now, t), 0, reset, wait
end}
