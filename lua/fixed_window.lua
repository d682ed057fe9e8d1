-- fixed_window.lua: limit per period, windows aligned to the epoch (or to
-- the natural day). One String per window, its start in the key.
--
-- key   rl:{<tag>}:fixed_window:<limit>:<periodMs>:<windowStartMs>
-- ARGV[o+1]  limit
-- ARGV[o+2]  unix ms at which the window ends
-- fw_reset is how long, in us, until a count of n no longer counts (a
-- helper of the library: a closure costs about 1,000 instructions a run).
local function fw_reset(n, ends, now)
  if n > 0 then return (ends - now) * 1000 end
  return 0
end
kinds.fixed_window = {nargs = 2, run = function(key, now, cost, o, grace, commit)
  local limit, ends = tonumber(ARGV[o + 1]), tonumber(ARGV[o + 2])
  local used = tonumber(redis.call('GET', key) or '0')
  if cost > limit then return 0, limit - used, -1, fw_reset(used, ends, now), 0 end
  if used + cost > limit then return 0, limit - used, (ends - now) * 1000, fw_reset(used, ends, now), 0 end
  if cost == 0 then return 1, limit - used, 0, fw_reset(used, ends, now), 0 end
  if commit then
    if redis.call('INCRBY', key, cost) == cost then redis.call('PEXPIRE', key, ends - now + grace) end
  end
  return 1, limit - used - cost, 0, fw_reset(used + cost, ends, now), 0
end}
