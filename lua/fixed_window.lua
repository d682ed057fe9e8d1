-- fixed_window.lua: limit per period, windows aligned to the epoch (or to
-- the natural day). One String per window, its start in the key.
--
-- key   rl:{<tag>}:fixed_window:<limit>:<periodMs>:<windowStartMs>
-- x     unix ms at which the window ends
kinds.fixed_window = function(key, now, cost, limit, period, param, x, grace)
  local ends = tonumber(x)
  local used = tonumber(redis.call('GET', key) or '0')
  local function reset(n)
    if n > 0 then return (ends - now) * 1000 end
    return 0
  end
  if cost > limit then return {0, limit - used, -1, reset(used), 0} end
  if used + cost > limit then return {0, limit - used, (ends - now) * 1000, reset(used), 0} end
  if cost == 0 then return {1, limit - used, 0, reset(used), 0} end
  return {1, limit - used - cost, 0, reset(used + cost), 0}, function()
    if redis.call('INCRBY', key, cost) == cost then redis.call('PEXPIRE', key, ends - now + grace) end
  end
end
