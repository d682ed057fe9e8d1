-- hours.lua: count hits in the current hour bucket, idempotent by event id.
-- Kind hours.
--
-- KEYS[1] hour key    hfreq:{<tag>}   Hash, field = epoch hour
-- KEYS[2] dedupe key  dedup:{<tag>}:h:<eid>   (unused when ARGV[5] = 0)
-- ARGV[1] hits (> 0)
-- ARGV[2] current epoch hour (unix seconds / 3600)
-- ARGV[3] retention R in hours: the counter's largest window. Every writer
--         keeps R+1 hours, whatever window it counts for.
-- ARGV[4] span N in hours (1..R): the window whose sum is returned
-- ARGV[5] dedupe TTL in milliseconds (0 = no event id)
--
-- Returns {sum, duplicate}: the sum of fields h-N+1..h after the hits, and
-- 1 when the event id was counted before (nothing changed).
local hour = tonumber(ARGV[2])
local keep = tonumber(ARGV[3])
local n = tonumber(ARGV[4])

local function window_sum()
  local fields = {}
  for i = 1, n do fields[i] = hour - n + i end
  local sum = 0
  for _, v in ipairs(redis.call('HMGET', KEYS[1], unpack(fields))) do
    if v then sum = sum + tonumber(v) end
  end
  return sum
end

if ARGV[5] ~= '0' then
  if not redis.call('SET', KEYS[2], '1', 'NX', 'PX', ARGV[5]) then
    return {window_sum(), 1}
  end
end

local hits = tonumber(ARGV[1])
local first = redis.call('HINCRBY', KEYS[1], hour, hits) == hits
redis.call('PEXPIRE', KEYS[1], (keep + 1) * 3600000)
-- Keep at most R+1 fields: drop the hours that left the retention. Only a
-- new hour field can push the hash past that, so only then look.
if first and redis.call('HLEN', KEYS[1]) > keep + 1 then
  local oldest = hour - keep
  for _, f in ipairs(redis.call('HKEYS', KEYS[1])) do
    if tonumber(f) < oldest then redis.call('HDEL', KEYS[1], f) end
  end
end
return {window_sum(), 0}
