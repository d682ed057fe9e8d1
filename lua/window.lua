-- window.lua: a window opened by the first hit (String + TTL), a part of
-- count.lua. Kinds day and seconds. Bit 1 in the dedupe set.
--
-- key   freq:{<tag>} (a campaign's day) or gfreq:{<tag>} (a business's window)
-- ARGV[o+1]  milliseconds until a window opened now ends (> 0)
--
-- hits 0 reads (the event was counted before). Returns {count, ttl}: the
-- count after the hits and the milliseconds left of the live window (PTTL);
-- nothing when quiet (and a quiet read reads nothing).
parts.window = {bit = 1, nargs = 1, run = function(key, hits, o, ids, quiet)
  if hits > 0 then
    local count = redis.call('INCRBY', key, hits == 1 and '1' or hits)
    -- The window is opened by the hit that created the key; a key that
    -- lost its TTL (set by hand) gets the new one rather than living forever.
    local ttl = count == hits and -1 or redis.call('PTTL', key)
    if ttl < 0 then
      redis.call('PEXPIRE', key, ARGV[o + 1])
      if quiet then return end
      ttl = tonumber(ARGV[o + 1])
    end
    if quiet then return end
    return {count, ttl}
  end
  if quiet then return end
  return {tonumber(redis.call('GET', key) or 0), redis.call('PTTL', key)}
end}
