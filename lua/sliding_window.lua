-- sliding_window.lua: the sliding window counter, the cheap approximation
-- of the log: the current fixed window's count plus the previous one's
-- weighted by how much of it the sliding period still covers, rounded
-- down.
--
-- key   rl:{<tag>}:sliding_window:<limit>:<periodMs>   Hash: w (window
--       index), c (its count), p (the previous window's count)
-- ARGV[o+1]  limit
-- ARGV[o+2]  period, ms
-- (The helpers take what they use as arguments: a function made inside a
-- run, a closure, costs about 1,000 instructions a run.)
-- sw_weighted is the previous window's count prev as the sliding period
-- still covers it e ms into the current window, rounded down.
local function sw_weighted(prev, e, period) return math.floor(prev * (period - e) / period) end
-- sw_first_fit is the first ms e of a window at which sw_weighted(prev, e)
-- <= room.
local function sw_first_fit(prev, room, period)
  if prev <= room then return 0 end
  return period - math.floor(((room + 1) * period + prev - 1) / prev) + 1
end
-- sw_reset is how long, in us, until the counts cc (window win) and pp
-- (the one before) no longer count.
local function sw_reset(cc, pp, win, period, now)
  if cc > 0 then return ((win + 2) * period - now) * 1000 end
  if pp > 0 then return ((win + 1) * period - now) * 1000 end
  return 0
end
kinds.sliding_window = {nargs = 2, run = function(key, now, cost, o, grace, commit)
  local limit, period = tonumber(ARGV[o + 1]), tonumber(ARGV[o + 2])
  local win = math.floor(now / period)
  local h = redis.call('HMGET', key, 'w', 'c', 'p')
  local w, c, p = tonumber(h[1]) or win, tonumber(h[2]) or 0, tonumber(h[3]) or 0
  if w == win - 1 then
    p, c = c, 0
  elseif w < win - 1 then
    p, c = 0, 0
  end
  local elapsed = now - win * period
  local est = sw_weighted(p, elapsed, period) + c
  if cost > limit then return 0, limit - est, -1, sw_reset(c, p, win, period, now), 0 end
  if est + cost > limit then
    local at
    if c + cost <= limit then
      at = win * period + sw_first_fit(p, limit - c - cost, period)
    else
      local e = sw_first_fit(c, limit - cost, period)
      if e >= period then at = (win + 2) * period else at = (win + 1) * period + e end
    end
    return 0, limit - est, (at - now) * 1000, sw_reset(c, p, win, period, now), 0
  end
  if cost == 0 then return 1, limit - est, 0, sw_reset(c, p, win, period, now), 0 end
  if commit then
    redis.call('HSET', key, 'w', win, 'c', c + cost, 'p', p)
    redis.call('PEXPIRE', key, (win + 2) * period - now + grace)
  end
  return 1, limit - est - cost, 0, sw_reset(c + cost, p, win, period, now), 0
end}
