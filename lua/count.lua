-- count.lua: count one event on one or more counters of one hash tag (the
-- day and the hour buckets of one dimension, say), with one event-id check
-- for all of them. The counters' functions (parts.<name>, one file each,
-- see window.lua) are prepended to this script.
--
-- KEYS[1]   dedupe set dedup:{<tag>}: ZSet, member = event id, score =
--           unix ms when last counted * 4 + the bits of the counters it
--           counted on (window 1, hours 2); members older than the dedupe
--           TTL are pruned on every run.
-- KEYS[1+i] the key of counter i
-- ARGV[1]   hits (> 0)
-- ARGV[2]   now, unix ms
-- ARGV[3]   dedupe TTL in milliseconds (0 = no event id)
-- ARGV[4]   event id
-- ARGV[5..] counter i: its part's name, how many arguments follow, them
--
-- Returns, for each counter: how many values follow, the part's values,
-- then 1 when the event was counted on that counter before (nothing
-- changed there) or 0. A counter that appears twice in one run counts once
-- for an event id, as a second run would.
local hits, now, ttl, eid = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4]
local seen = 0
if ttl > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. ((now - ttl) * 4))
  local s = redis.call('ZSCORE', KEYS[1], eid)
  if s then seen = tonumber(s) % 4 end
end
local out, done, a, k = {}, seen, 5, 2
while a <= #ARGV do
  local p, n = parts[ARGV[a]], tonumber(ARGV[a + 1])
  local dup = ttl > 0 and bit.band(done, p.bit) ~= 0
  local r = p.run(KEYS[k], dup and 0 or hits, {unpack(ARGV, a + 2, a + 1 + n)})
  if ttl > 0 then done = bit.bor(done, p.bit) end
  out[#out + 1] = #r + 1
  for _, v in ipairs(r) do out[#out + 1] = v end
  out[#out + 1] = dup and 1 or 0
  a, k = a + 2 + n, k + 1
end
if done ~= seen then
  redis.call('ZADD', KEYS[1], now * 4 + done, eid)
  redis.call('PEXPIRE', KEYS[1], ttl)
end
return out
