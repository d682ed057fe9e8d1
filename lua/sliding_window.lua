-- sliding_window.lua: the sliding window counter, the cheap approximation
-- of the log: the current fixed window's count plus the previous one's
-- weighted by how much of it the sliding period still covers, rounded
-- down.
--
-- key   rl:{<tag>}:sliding_window:<limit>:<periodMs>   Hash: w (window
--       index), c (its count), p (the previous window's count)
kinds.sliding_window = function(key, now, cost, limit, period, param, x, grace)
  local win = math.floor(now / period)
  local h = redis.call('HMGET', key, 'w', 'c', 'p')
  local w, c, p = tonumber(h[1]) or win, tonumber(h[2]) or 0, tonumber(h[3]) or 0
  if w == win - 1 then
    p, c = c, 0
  elseif w < win - 1 then
    p, c = 0, 0
  end
  local elapsed = now - win * period
  local function weighted(prev, e) return math.floor(prev * (period - e) / period) end
  -- the first ms e of a window at which weighted(prev, e) <= room
  local function first_fit(prev, room)
    if prev <= room then return 0 end
    return period - math.floor(((room + 1) * period + prev - 1) / prev) + 1
  end
  local function reset(cc, pp)
    if cc > 0 then return ((win + 2) * period - now) * 1000 end
    if pp > 0 then return ((win + 1) * period - now) * 1000 end
    return 0
  end
  local est = weighted(p, elapsed) + c
  if cost > limit then return {0, limit - est, -1, reset(c, p), 0} end
  if est + cost > limit then
    local at
    if c + cost <= limit then
      at = win * period + first_fit(p, limit - c - cost)
    else
      local e = first_fit(c, limit - cost)
      if e >= period then at = (win + 2) * period else at = (win + 1) * period + e end
    end
    return {0, limit - est, (at - now) * 1000, reset(c, p), 0}
  end
  if cost == 0 then return {1, limit - est, 0, reset(c, p), 0} end
  return {1, limit - est - cost, 0, reset(c + cost, p), 0}, function()
    redis.call('HSET', key, 'w', win, 'c', c + cost, 'p', p)
    redis.call('PEXPIRE', key, (win + 2) * period - now + grace)
  end
end
