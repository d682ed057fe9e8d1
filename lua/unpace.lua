-- unpace.lua: take back an event that sliding.lua recorded, when another
-- dimension of the same request refused it (all-or-nothing across keys that
-- may live in different cluster slots).
--
-- KEYS[1] sfreq:{<tag>}:<spanSec>  ZSet
-- ARGV[1] event id (the member)
-- ARGV[2] score it was recorded with (only that record is removed)
--
-- Returns 1 when the member was removed, 0 otherwise.
if tonumber(redis.call('ZSCORE', KEYS[1], ARGV[1])) == tonumber(ARGV[2]) then
  return redis.call('ZREM', KEYS[1], ARGV[1])
end
return 0
