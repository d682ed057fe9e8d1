-- sliding_log.lua: exact, one ZSet member per admitted unit of cost; an
-- event counts while now - its score < period (a list of
-- timestamps).
--
-- key   rl:{<tag>}:sliding_log:<limit>:<periodMs>   ZSet, score = unix ms
-- x     a unique id of this hit (members are <id>.<n>)
kinds.sliding_log = function(key, now, cost, limit, period, param, x, grace)
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now - period)
  local used = redis.call('ZCARD', key)
  -- resetAfter: until the log is empty.
  local function reset(admitted)
    if admitted and cost > 0 then return period * 1000 end
    if used == 0 then return 0 end
    local newest = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
    return (tonumber(newest[2]) + period - now) * 1000
  end
  if cost > limit then return {0, limit - used, -1, reset(), 0} end
  if used + cost > limit then
    -- The (used + cost - limit)-th oldest event must leave first.
    local n = used + cost - limit - 1
    local e = redis.call('ZRANGE', key, n, n, 'WITHSCORES')
    return {0, limit - used, (tonumber(e[2]) + period - now) * 1000, reset(), 0}
  end
  if cost == 0 then return {1, limit - used, 0, reset(true), 0} end
  return {1, limit - used - cost, 0, reset(true), 0}, function()
    local args = {}
    for i = 1, cost do
      args[#args + 1] = now
      args[#args + 1] = x .. '.' .. i
      if #args == 1000 or i == cost then
        redis.call('ZADD', key, unpack(args))
        args = {}
      end
    end
    redis.call('PEXPIRE', key, period + grace)
  end
end
