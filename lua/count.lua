-- count.lua: count events on one or more counters of one hash tag (the
-- day and the hour buckets of one dimension, say), with one event-id check
-- per event for all of them. Several events with the same counters (a hot
-- bundle's notices in one batch) share one run: each counter is written
-- once with the hits of every event that counts on it, and each event is
-- answered as if it had run alone, in order. The counters' functions
-- (parts.<name>, one file each, see window.lua) are prepended to this
-- script.
--
-- KEYS[1]   dedupe set dedup:{<tag>}: ZSet, member = event id, score =
--           unix ms when last counted * 4 + the bits of the counters it
--           counted on (window 1, hours 2); members older than the dedupe
--           TTL are pruned on every run.
-- KEYS[1+i] the key of counter i
-- ARGV[1]   hits of each event (> 0)
-- ARGV[2]   now, unix ms
-- ARGV[3]   dedupe TTL in milliseconds (0 = no event id)
-- ARGV[4]   E, the number of events (1 without event ids)
-- ARGV[5..4+E] their event ids, distinct
-- then      counter i: its part's name, how many arguments follow, them
--
-- Returns, for each event and each of its counters: how many values
-- follow, the part's values (the first one, the count, as it was right
-- after that event), then 1 when the event was counted on that counter
-- before (nothing changed there) or 0. A counter that appears twice in one
-- event counts once for an event id, as a second run would.
local hits, now, ttl, ne = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local seen, done = {}, {}
for i = 1, ne do seen[i] = 0 end
if ttl > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. ((now - ttl) * 4))
  local s = redis.call('ZMSCORE', KEYS[1], unpack(ARGV, 5, 4 + ne))
  for i = 1, ne do
    if s[i] then seen[i] = tonumber(s[i]) % 4 end
  end
end
-- The counters, and which events count on each.
local ps, a, k = {}, 5 + ne, 2
while a <= #ARGV do
  local n = tonumber(ARGV[a + 1])
  ps[#ps + 1] = {p = parts[ARGV[a]], key = KEYS[k], args = {unpack(ARGV, a + 2, a + 1 + n)}, counting = 0}
  a, k = a + 2 + n, k + 1
end
local dup = {}
for i = 1, ne do
  done[i], dup[i] = seen[i], {}
  for j, q in ipairs(ps) do
    local d = ttl > 0 and bit.band(done[i], q.p.bit) ~= 0
    if ttl > 0 then done[i] = bit.bor(done[i], q.p.bit) end
    dup[i][j] = d
    if not d then q.counting = q.counting + 1 end
  end
end
for _, q in ipairs(ps) do q.r = q.p.run(q.key, hits * q.counting, q.args) end
-- Event i's count is the final one less the hits of the events after it.
local out = {}
for i = 1, ne do
  for j, q in ipairs(ps) do
    if not dup[i][j] then q.counting = q.counting - 1 end
    out[#out + 1] = #q.r + 1
    out[#out + 1] = q.r[1] - hits * q.counting
    for x = 2, #q.r do out[#out + 1] = q.r[x] end
    out[#out + 1] = dup[i][j] and 1 or 0
  end
end
if ttl > 0 then
  local z = {}
  for i = 1, ne do
    if done[i] ~= seen[i] then
      z[#z + 1] = now * 4 + done[i]
      z[#z + 1] = ARGV[4 + i]
    end
  end
  if #z > 0 then
    redis.call('ZADD', KEYS[1], unpack(z))
    redis.call('PEXPIRE', KEYS[1], ttl)
  end
end
return out
