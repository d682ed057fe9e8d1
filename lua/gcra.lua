-- gcra.lua: the generic cell rate algorithm (as redis-cell and
-- go-redis/redis_rate): one emission every period/limit (rounded down to a
-- microsecond), burst admitted at once.
--
-- key   rl:{<tag>}:gcra:<limit>:<periodMs>:<burst>   String: the
--       theoretical arrival time, unix us
-- ARGV[o+1]  t, the emission interval in us: period/limit rounded down
-- ARGV[o+2]  burst
kinds.gcra = {nargs = 2, run = function(key, now, cost, o, grace, commit)
  now = now * 1000
  local t, burst = tonumber(ARGV[o + 1]), tonumber(ARGV[o + 2])
  local tolerance = burst * t
  local tat = math.max(tonumber(redis.call('GET', key) or '0'), now)
  local new_tat = tat + cost * t
  local diff = now - (new_tat - tolerance)
  local free = math.floor((now - (tat - tolerance)) / t)
  if cost > burst then return 0, free, -1, tat - now, 0 end
  if diff < 0 then return 0, free, -diff, tat - now, 0 end
  if cost == 0 then return 1, free, 0, tat - now, 0 end
  if commit then
    redis.call('SET', key, string.format('%.0f', new_tat), 'PX', math.floor((new_tat - now) / 1000) + grace)
  end
  return 1, math.floor(diff / t), 0, new_tat - now, 0
end}
