-- token_bucket.lua: Guava's RateLimiter (SmoothBursty), computed lazily:
-- permits are refilled on access, one every period/limit (rounded down to
-- a microsecond), up to burst; no thread refills anything. A hit may take
-- more than is stored and the next caller pays the wait. Permits are
-- stored as the microseconds it takes to make them.
--
-- key   rl:{<tag>}:token_bucket:<limit>:<periodMs>:<burst>   Hash: s
--       (stored), n (next free, unix us); a new bucket is full
-- param burst
-- x     '1' acquire (reserve, answer the delay), '0' tryAcquire (refuse
--       while an earlier reservation's wait runs)
kinds.token_bucket = function(key, now, cost, limit, period, burst, x, grace)
  now = now * 1000
  local t = math.floor(period * 1000 / limit)
  local full = burst * t
  local h = redis.call('HMGET', key, 's', 'n')
  local stored, nxt = tonumber(h[1]) or full, tonumber(h[2]) or now
  if now > nxt then
    stored = math.min(full, stored + now - nxt)
    nxt = now
  end
  local function remaining()
    if nxt > now then return 0 end
    return math.floor(stored / t)
  end
  if x ~= '1' and nxt > now then return {0, 0, nxt - now, nxt - now + full - stored, 0} end
  if cost == 0 then return {1, remaining(), 0, nxt - now + full - stored, 0} end
  local wait = nxt - now
  local take = math.min(cost * t, stored)
  nxt = nxt + cost * t - take
  stored = stored - take
  local reset = nxt - now + full - stored
  return {1, remaining(), 0, reset, wait}, function()
    redis.call('HSET', key, 's', string.format('%.0f', stored), 'n', string.format('%.0f', nxt))
    redis.call('PEXPIRE', key, math.floor(reset / 1000) + grace)
  end
end
