-- incr.lua: count one event on one counter, atomically.
--
-- KEYS[1] day key     freq:{<event>:<dim>:<cid>:<id>}   String
-- KEYS[2] hour key    hfreq:{<event>:<dim>:<cid>:<id>}  Hash, field = epoch hour
-- KEYS[3] dedupe key  dedup:{<event>:<dim>:<cid>:<id>}:<eid>  (unused when ARGV[4] = 0)
-- KEYS[4] pace key    sfreq:{<event>:<dim>:<cid>:<id>}  ZSet (unused when ARGV[5] = 0)
-- ARGV[1] milliseconds until the end of the current day (> 0)
-- ARGV[2] current epoch hour (unix seconds / 3600)
-- ARGV[3] window hours N (0 = day counter only)
-- ARGV[4] dedupe TTL in milliseconds (0 = no event id)
-- ARGV[5] pace window in milliseconds (0 = do not record in the pace ZSet)
-- ARGV[6] now, unix milliseconds (the pace score)
-- ARGV[7] event id: the pace member (one member per event id)
--
-- Returns {day, window, duplicate}: the day count and the sum of hour fields
-- h-N+1..h after the increment (window 0 when N = 0); duplicate is 1 when
-- the event id was already counted on this counter and nothing changed.
local hour = tonumber(ARGV[2])
local n = tonumber(ARGV[3])

local function window_sum()
  if n == 0 then return 0 end
  local fields = {}
  for i = 1, n do fields[i] = hour - n + i end
  local sum = 0
  for _, v in ipairs(redis.call('HMGET', KEYS[2], unpack(fields))) do
    if v then sum = sum + tonumber(v) end
  end
  return sum
end

if ARGV[4] ~= '0' then
  if not redis.call('SET', KEYS[3], '1', 'NX', 'PX', ARGV[4]) then
    return {tonumber(redis.call('GET', KEYS[1]) or 0), window_sum(), 1}
  end
end

local day = redis.call('INCR', KEYS[1])
if day == 1 then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
end

if n > 0 then
  local first = redis.call('HINCRBY', KEYS[2], hour, 1) == 1
  redis.call('PEXPIRE', KEYS[2], (n + 1) * 3600000)
  -- Keep at most n+1 fields: drop the hours that left the window. Only a
  -- new hour field can push the hash past that, so only then look.
  if first and redis.call('HLEN', KEYS[2]) > n + 1 then
    local oldest = hour - n
    for _, f in ipairs(redis.call('HKEYS', KEYS[2])) do
      if tonumber(f) < oldest then redis.call('HDEL', KEYS[2], f) end
    end
  end
end

local pace = tonumber(ARGV[5])
if pace > 0 then
  local now = tonumber(ARGV[6])
  redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', '(' .. (now - pace))
  redis.call('ZADD', KEYS[4], 'NX', now, ARGV[7])
  redis.call('PEXPIRE', KEYS[4], pace)
end

return {day, window_sum(), 0}
