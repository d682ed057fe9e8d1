-- reserve.lua: in-flight bids, a part of count.lua. Kind reserve. Bit 256
-- in the dedupe set (a bid is reserved once per bid id).
--
-- key   rsv:{<tag>}  ZSet, member = bid id, score = unix ms it expires
-- ARGV[o+1]  now, unix ms
-- ARGV[o+2]  the bid id
-- ARGV[o+3]  milliseconds the reservation lasts (> 0)
--
-- hits 0 reads. Returns {n}: the reservations live after the hit (expired
-- ones are pruned on every write); nothing when quiet.
parts.reserve = {bit = 256, nargs = 3, run = function(key, hits, o, ids, quiet)
  local now = tonumber(ARGV[o + 1])
  if hits > 0 then
    local exp = now + tonumber(ARGV[o + 3])
    redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
    redis.call('ZADD', key, exp, ARGV[o + 2])
    local ttl = redis.call('PTTL', key)
    if ttl < tonumber(ARGV[o + 3]) then redis.call('PEXPIRE', key, ARGV[o + 3]) end
  end
  if quiet then return end
  return {redis.call('ZCOUNT', key, '(' .. now, '+inf')}
end}
