-- sliding.lua: exact sliding window with an optional limit and minimum gap,
-- check-and-record. Kind sliding.
--
-- KEYS[1] sfreq:{<tag>}:<spanSec>  ZSet, member = event id, score = ms
-- ARGV[1] now, unix milliseconds
-- ARGV[2] window in milliseconds: an event counts while now - score <= window
-- ARGV[3] limit: most events the window may hold (0 = record without deciding)
-- ARGV[4] minimum gap in milliseconds between two events (0 = none)
-- ARGV[5] event id (the member)
--
-- Returns {result, count, lastAt, duplicate, previous}:
--   result    1 recorded, 0 over the limit, -1 too soon after the last event
--   count     events in the window after this call
--   lastAt    score of the newest event (0 when none)
--   duplicate 1 when this event id was already recorded (nothing changes, result 1)
--   previous  lastAt before this call
local now = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local limit = tonumber(ARGV[3])
local gap = tonumber(ARGV[4])

redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. (now - window))
local count = redis.call('ZCARD', KEYS[1])
local last = 0
local newest = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
if newest[2] then last = tonumber(newest[2]) end

if redis.call('ZSCORE', KEYS[1], ARGV[5]) then
  return {1, count, last, 1, last}
end
if limit > 0 then
  if gap > 0 and last > 0 and now - last < gap then
    return {-1, count, last, 0, last}
  end
  if count >= limit then
    return {0, count, last, 0, last}
  end
end
redis.call('ZADD', KEYS[1], now, ARGV[5])
redis.call('PEXPIRE', KEYS[1], window)
if now > last then last = now end
return {1, count + 1, last, 0, newest[2] and tonumber(newest[2]) or 0}
