-- window.lua: count hits in a window opened by the first hit (String + TTL),
-- idempotent by event id. Kinds day and seconds.
--
-- KEYS[1] counter key  freq:{<tag>} or gfreq:{<tag>}   String
-- KEYS[2] dedupe key   dedup:{<tag>}:w:<eid>          (unused when ARGV[3] = 0)
-- ARGV[1] hits (> 0)
-- ARGV[2] milliseconds until a window opened now ends (> 0)
-- ARGV[3] dedupe TTL in milliseconds (0 = no event id)
--
-- Returns {count, ttl, duplicate}: the count after the hits, the
-- milliseconds left of the live window (PTTL), and 1 when the event id was counted
-- before (nothing changed).
local function ttl()
  return redis.call('PTTL', KEYS[1])
end

if ARGV[3] ~= '0' then
  if not redis.call('SET', KEYS[2], '1', 'NX', 'PX', ARGV[3]) then
    return {tonumber(redis.call('GET', KEYS[1]) or 0), ttl(), 1}
  end
end

local hits = tonumber(ARGV[1])
local count = redis.call('INCRBY', KEYS[1], hits)
-- The window is opened by the hit that created the key; a key that lost
-- its TTL (set by hand) gets the new one rather than living forever.
if count == hits or redis.call('PTTL', KEYS[1]) < 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return {count, ttl(), 0}
