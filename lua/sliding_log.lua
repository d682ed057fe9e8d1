-- sliding_log.lua: exact, one ZSet member per admitted unit of cost; an
-- event counts while now - its score < period (a list of
-- timestamps).
--
-- key   rl:{<tag>}:sliding_log:<limit>:<periodMs>   ZSet, score = unix ms
-- ARGV[o+1]  limit
-- ARGV[o+2]  period, ms
-- ARGV[o+3]  a unique id of this hit (members are <id>.<n>)
-- sl_reset is resetAfter, in us: until the log of used events is empty,
-- a period once a hit is admitted (a helper of the library: a closure
-- costs about 1,000 instructions a run).
local function sl_reset(admitted, key, now, cost, period, used)
  if admitted and cost > 0 then return period * 1000 end
  if used == 0 then return 0 end
  local newest = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  return (tonumber(newest[2]) + period - now) * 1000
end
kinds.sliding_log = {nargs = 3, run = function(key, now, cost, o, grace, commit)
  local limit, period, x = tonumber(ARGV[o + 1]), tonumber(ARGV[o + 2]), ARGV[o + 3]
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now - period)
  local used = redis.call('ZCARD', key)
  if cost > limit then return 0, limit - used, -1, sl_reset(false, key, now, cost, period, used), 0 end
  if used + cost > limit then
    -- The (used + cost - limit)-th oldest event must leave first.
    local n = used + cost - limit - 1
    local e = redis.call('ZRANGE', key, n, n, 'WITHSCORES')
    return 0, limit - used, (tonumber(e[2]) + period - now) * 1000, sl_reset(false, key, now, cost, period, used), 0
  end
  if cost == 0 then return 1, limit - used, 0, sl_reset(true, key, now, cost, period, used), 0 end
  if commit then
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
  return 1, limit - used - cost, 0, sl_reset(true, key, now, cost, period, used), 0
end}
