-- limit.lua: one rate-limit check against one or more limits on
-- keys of one hash tag, all or nothing: the hit is admitted when every
-- limit admits it, and only then does any of them consume. The kinds
-- (kinds.<name> = {nargs, run}, one file each) and this file are in the
-- Redis Functions library (lua.Library) with count.lua: KEYS and ARGV are
-- each call's.
--
-- A kind's run(key, now, cost, o, grace, commit) answers a hit of cost
-- as five values (allowed, remaining, retryAfterUs, resetAfterUs,
-- delayUs), and writes what it consumes only when commit is set and it
-- admits. A check of one limit (the usual) runs its kind once, with
-- commit; a check of several runs each without, then, when all admit,
-- each again with commit (the same answer: nothing changed in between).
-- Values come back as values, not tables: a table costs about 2,500
-- instructions.
--
-- KEYS[i] the key of limit i
-- ARGV[1] now, unix ms
-- ARGV[2] cost (0 = peek: what a hit of cost 1 would get, its decision,
--         retry-after and delay, with remaining and reset as they are;
--         nothing is consumed)
-- then    limit i: its kind's name, then the kind's arguments (as many
--         as its nargs): the kind reads its k-th as ARGV[o+k], o the
--         offset of its name (no table of them is built, and a kind gets
--         only what it uses, as numbers only where it computes)
--
-- KEYS[n+1] optional: a counter (String) that an admitted hit increments
--         by cost (the view counter's total); its value is returned last.
--
-- Returns, for each limit: allowed, remaining, retryAfterUs (-1: never,
-- the cost is above what it holds), resetAfterUs, delayUs; then the
-- counter's value when there is one. The hit was admitted when every
-- limit's allowed is 1. When one limit refuses, the others answer as a
-- peek (cost 0) would. Each value of the answer costs about 2,300
-- instructions to send.
-- (a cost of 1, the usual, is compared as it comes: tonumber costs about
-- 2,000 instructions)
local now, cost = tonumber(ARGV[1]), ARGV[2] == '1' and 1 or tonumber(ARGV[2])
-- grace, ms: keys live this long past the instant they stop mattering,
-- for counter instances whose clocks lag (core's limitGraceMs).
local grace = 1000
local na = #ARGV
local k = kinds[ARGV[3]]
local out, all, n
if 4 + k.nargs > na then
  -- One limit (the usual): its kind runs once, and writes when it admits.
  local ok, remaining, retry, reset, delay, _
  if cost > 0 then
    ok, remaining, retry, reset, delay = k.run(KEYS[1], now, cost, 3, grace, true)
  else
    -- A peek: what a hit of 1 would get, with remaining and reset as they are.
    ok, _, retry, _, delay = k.run(KEYS[1], now, 1, 3, grace, false)
    _, remaining, _, reset = k.run(KEYS[1], now, 0, 3, grace, false)
  end
  out, all, n = {ok, remaining, retry, reset, delay}, ok, 1
else
  -- Several limits. answer is limit k's (at offset o) for a hit of c,
  -- written when commit; a peek's as for one limit.
  local function answer(k, key, o, c, commit)
    if c > 0 then return k.run(key, now, c, o, grace, commit) end
    local ok, _, retry, _, delay = k.run(key, now, 1, o, grace, false)
    local _, remaining, _, reset = k.run(key, now, 0, o, grace, false)
    return ok, remaining, retry, reset, delay
  end
  -- What each answers the hit, without writing.
  local a
  all, n, a, out = 1, 0, 3, {}
  while a <= na do
    k = kinds[ARGV[a]]
    local m = 5 * n
    n = n + 1
    out[m + 1], out[m + 2], out[m + 3], out[m + 4], out[m + 5] = answer(k, KEYS[n], a, cost, false)
    if out[m + 1] == 0 then all = 0 end
    a = a + 1 + k.nargs
  end
  -- All admit: each consumes (its answer is the same). One refuses: those
  -- that admit answer as a hit of no cost.
  if all == 0 or cost > 0 then
    a = 3
    for i = 1, n do
      k = kinds[ARGV[a]]
      local m = 5 * (i - 1)
      if all == 1 then
        k.run(KEYS[i], now, cost, a, grace, true)
      elseif out[m + 1] == 1 then
        out[m + 1], out[m + 2], out[m + 3], out[m + 4], out[m + 5] = k.run(KEYS[i], now, 0, a, grace, false)
      end
      a = a + 1 + k.nargs
    end
  end
end
if #KEYS > n then
  if all == 1 and cost > 0 then
    out[5 * n + 1] = redis.call('INCRBY', KEYS[n + 1], cost)
  else
    out[5 * n + 1] = tonumber(redis.call('GET', KEYS[n + 1]) or '0')
  end
end
return out
