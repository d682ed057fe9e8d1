-- leaky_bucket.lua: the leaky bucket as a queue: units leave one every
-- period/limit (rounded down to a microsecond); a hit joins the queue and
-- waits for its turn (delay), or is refused when capacity units are
-- queued. Nothing drains it: the state is the time the queue empties.
--
-- key   rl:{<tag>}:leaky_bucket:<limit>:<periodMs>:<capacity>   String:
--       unix us at which the queue empties
-- ARGV[o+1]  t, the interval between two units in us: period/limit
--       rounded down
-- ARGV[o+2]  capacity
kinds.leaky_bucket = {nargs = 2, run = function(key, now, cost, o, grace, commit)
  now = now * 1000
  local t, cap = tonumber(ARGV[o + 1]), tonumber(ARGV[o + 2])
  local empty = math.max(tonumber(redis.call('GET', key) or '0'), now)
  local queued = empty - now
  local room = cap * t
  local free = math.floor((room - queued) / t)
  if cost > cap then return 0, free, -1, queued, 0 end
  if queued + cost * t > room then return 0, free, queued + cost * t - room, queued, 0 end
  if cost == 0 then return 1, free, 0, queued, 0 end
  empty = empty + cost * t
  if commit then
    redis.call('SET', key, string.format('%.0f', empty), 'PX', math.floor((empty - now) / 1000) + grace)
  end
  return 1, math.floor((room - (empty - now)) / t), 0, empty - now, queued
end}
