-- count.lua: count events on one or more counters of one hash tag (the
-- day and the hour buckets of one dimension, say), with one event-id check
-- per event for all of them. Several events with the same counters (a hot
-- bundle's notices in one batch) share one run: each counter is written
-- once with the hits of every event that counts on it, and each event is
-- answered as if it had run alone, in order. The counters' functions
-- (parts.<name>, one file each, see window.lua) and this file are one
-- Redis Functions library (lua.CountLibrary): KEYS and ARGV are each
-- call's keys and arguments.
--
-- KEYS[1]   dedupe set dedup:{<tag>}: ZSet, member = event id, score =
--           unix ms when last counted * W + the bits of the counters it
--           counted on (window 1, hours 2, ...); a member older than the
--           dedupe TTL counts as never seen, and such members are pruned
--           on the runs whose now is a multiple of 16 ms (a prune is two
--           Redis calls, a tenth of a run: done now and then, the set
--           still holds at most the TTL's ids and a few more).
--           A part with "needs" (a bit) runs only for event ids whose
--           score has that bit (release needs reserve's). A part with
--           "ids" gets the event ids it counts, as its fourth argument
--           (release: the bids it ends), so that its arguments are the
--           same for every event and events share runs. A part's fifth
--           argument says the run is quiet: it answers nothing (and
--           computes nothing only an answer needs).
-- KEYS[1+i] the key of counter i
-- ARGV[1]   hits of each event (> 0)
-- ARGV[2]   now, unix ms
-- ARGV[3]   dedupe TTL in milliseconds (0 = no event id)
-- ARGV[4]   E, the number of events (1 without event ids); -E for a quiet
--           run (callback's forwarding), which answers only where each
--           event was counted before
-- ARGV[5..4+E] their event ids, distinct
-- then      counter i: its part's name, then the part's arguments (as
--           many as its nargs): the part reads its k-th as ARGV[o+k], o
--           the offset of its name (no table of them is built per run)
--
-- Returns, for each event and each of its counters: how many values
-- follow, the part's values (the first one, the count, as it was right
-- after that event), then 1 when the event was counted on that counter
-- before (nothing changed there) or 0. A counter that appears twice in one
-- event counts once for an event id, as a second run would. A quiet run
-- returns, for each event, the counters it was counted on before: the sum
-- of 2^(i-1) over each such counter i (each value answered costs about
-- 2,300 instructions, and a table about 2,500: a quiet run of one event
-- answers one value and builds few).
--
-- A string becomes a number (tonumber, strtod) and a number a Redis
-- argument (sprintf) at about 2,000 instructions each, a tenth of a run
-- in all: the usual arguments ('1', '0') are compared as they come, and
-- strings go to Redis as they came.
local hits = ARGV[1] == '1' and 1 or tonumber(ARGV[1])
-- dedupe: the run checks event ids; ttl, their TTL as a number, is made
-- only where arithmetic needs it (pruning, an id seen before).
local now, dedupe, ttl = tonumber(ARGV[2]), ARGV[3] ~= '0', nil
local ne, quiet = ARGV[4], false
if ne == '1' then
  ne = 1
elseif ne == '-1' then
  ne, quiet = 1, true
else
  ne = tonumber(ne)
  if ne < 0 then ne, quiet = -ne, true end
end
-- W, the score's room for the parts' bits: 1024, room for ten parts, all
-- ten taken (window 1 ... release 512): an eleventh needs a wider W, with
-- the scores written at 1024 decoded as those of 4 are. Scores written
-- with W = 4 (before week and month) are below LEGACY (unix ms * 4 until
-- the year 9000) and decode with 4: an event counted just before an
-- upgrade is still a duplicate just after it. They are pruned by their
-- own scale, and none is written any more. Every part's bit is below W
-- (lua's TestPartBits).
local w, legacy = 1024, 1e15
-- The counters: counter j's part is fn[j], its key KEYS[j + 1], its
-- arguments in ARGV from off[j] on.
local fn, off, a, np, na = {}, {}, 5 + ne, 0, #ARGV
while a <= na do
  local p = parts[ARGV[a]]
  np = np + 1
  fn[np], off[np] = p, a
  a = a + 1 + p.nargs
end
-- added: the one event id is new, and was added with the score it ends
-- with: ZADD NX both asks and writes, one call where ZSCORE and ZADD are
-- two. An id already there (a duplicate, or one past the TTL not pruned
-- yet) is asked again with ZSCORE. A new id ends with the bits of the
-- parts that need no other's (a part that needs one does nothing for a
-- new id); when there are none, it is not added (nothing to remember).
-- seen: the scores of the ids already there (none when added).
local seen, added
if dedupe then
  if now % 16 == 0 then
    ttl = tonumber(ARGV[3])
    redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. ((now - ttl) * 4))
    redis.call('ZREMRANGEBYSCORE', KEYS[1], legacy, '(' .. ((now - ttl) * w))
  end
  if ne == 1 then
    local bits = 0
    for j = 1, np do
      if not fn[j].needs then bits = bit.bor(bits, fn[j].bit) end
    end
    added = bits ~= 0 and redis.call('ZADD', KEYS[1], 'NX', now * w + bits, ARGV[5]) == 1
    if not added then seen = {redis.call('ZSCORE', KEYS[1], ARGV[5])} end
  else
    seen = redis.call('ZMSCORE', KEYS[1], unpack(ARGV, 5, 4 + ne))
  end
end
-- Which events count on which counter: dup[(i-1)*np + j]; counting[j],
-- how many count on counter j; ids[j], their ids for a part that takes
-- them; z, the ZADD of the ids whose bits changed (not when added).
local dup, counting, ids, z = {}, {}, nil, nil
for j = 1, np do
  counting[j] = 0
  if fn[j].ids then
    ids = ids or {}
    ids[j] = {}
  end
end
for i = 1, ne do
  local d = 0
  if seen and seen[i] then
    d, ttl = tonumber(seen[i]), ttl or tonumber(ARGV[3])
    local scale = d < legacy and 4 or w
    -- Counted longer ago than the TTL (not pruned yet): never seen.
    d = math.floor(d / scale) < now - ttl and 0 or d % scale
  end
  local was = d
  for j = 1, np do
    local b, needs = fn[j].bit, fn[j].needs
    local isdup = dedupe and bit.band(d, b) ~= 0
    if needs and not isdup and bit.band(was, needs) == 0 then
      -- A part that only acts on what another part did for this event
      -- id (release: a reservation) has nothing to do: answered as a
      -- duplicate, its bit not set.
      isdup = true
    elseif dedupe then
      d = bit.bor(d, b)
    end
    dup[(i - 1) * np + j] = isdup
    if not isdup then
      counting[j] = counting[j] + 1
      if ids and ids[j] then ids[j][counting[j]] = ARGV[4 + i] end
    end
  end
  if dedupe and not added and d ~= was then
    z = z or {}
    z[#z + 1] = now * w + d
    z[#z + 1] = ARGV[4 + i]
  end
end
local out = {}
if quiet then
  for j = 1, np do fn[j].run(KEYS[j + 1], hits * counting[j], off[j], ids and ids[j], true) end
  for i = 1, ne do
    local m, b, o = 0, 1, (i - 1) * np
    for j = 1, np do
      if dup[o + j] then m = m + b end
      b = b * 2
    end
    out[i] = m
  end
else
  local res = {}
  for j = 1, np do res[j] = fn[j].run(KEYS[j + 1], hits * counting[j], off[j], ids and ids[j], false) end
  -- Event i's count is the final one less the hits of the events after it
  -- (plus them, for a part whose hits take away: down).
  local o = 0
  for i = 1, ne do
    for j = 1, np do
      local isdup, r = dup[(i - 1) * np + j], res[j]
      if not isdup then counting[j] = counting[j] - 1 end
      out[o + 1], out[o + 2] = #r + 1, r[1] + (fn[j].down and 1 or -1) * hits * counting[j]
      o = o + 2
      for x = 2, #r do
        o = o + 1
        out[o] = r[x]
      end
      o = o + 1
      out[o] = isdup and 1 or 0
    end
  end
end
if added then
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
elseif z then
  redis.call('ZADD', KEYS[1], unpack(z))
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
end
return out
