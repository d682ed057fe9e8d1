-- wrk script of make bench. MODE picks the request; FILL is how many device
-- counters the fill wrote (ids are UUID-shaped from their index); RUN makes
-- event ids unique across runs.
--   cold   GET  /v1/freq for a random filled device, 3-hour window
--   write  POST /v1/incr for a random device + hot bundle and tagid, with an eid
--   writebatch  POST /v1/incr/batch: 20 such writes, as callback's forwarder
--           sends them but answering their counts (callback's are quiet: about
--           4% more notices a second, Redis the bound either way)
--   batch  POST /v1/freq/batch: 50 candidate campaigns for one random device
--   win    GET  /win on callback for a random device, counted on tagid e2e too
--   addfreq   POST FrequencyControl/AddFreq (Connect JSON) for a random user key
--   getbatch  POST FrequencyControl/BatchGetFreq: 50 random user keys
--   decide  POST /v1/decide: the campaigns of make bench's decide runs
--           (DECIDE_CIDS, their caps declared) for a random filled device
--   limit:<algorithm>  POST /v1/limit, 100 per minute, for a random user key
local mode = os.getenv("MODE") or "cold"
local algorithm = nil
if string.sub(mode, 1, 6) == "limit:" then
  mode, algorithm = "limit", string.sub(mode, 7)
end
local fill = tonumber(os.getenv("FILL") or "1000000")
local run = os.getenv("RUN") or "0"

local threads = 0
function setup(thread)
  thread:set("tid", threads)
  threads = threads + 1
end

local seq = 0
function init(args)
  math.randomseed(os.time() + (tid or 0) * 7919)
end

local function device()
  local i = math.random(0, fill - 1)
  return string.format("%08x-0000-4000-8000-%012x", i, i)
end

local function eid()
  seq = seq + 1
  return string.format("b%s-%d-%d", run, tid or 0, seq)
end

local batch_head = '{"items":['
local decide_cands = {}
for cid in string.gmatch(os.getenv("DECIDE_CIDS") or "", "[^,]+") do
  decide_cands[#decide_cands + 1] = '{"cid":"' .. cid .. '"}'
end
decide_cands = '},"candidates":[' .. table.concat(decide_cands, ",") .. "]}"

request = function()
  if mode == "cold" then
    return wrk.format("GET", "/v1/freq?cid=42&device=" .. device() .. "&windowHours=3")
  elseif mode == "write" then
    return wrk.format("POST", "/v1/incr?cid=42&device=" .. device() .. "&bundle=com.hot&tagid=7&windowHours=3&eid=" .. eid())
  elseif mode == "writebatch" then
    local items = {}
    for c = 1, 20 do
      items[c] = '{"cid":"42","dims":{"device":"' .. device() .. '","bundle":"com.hot","tagid":"7"},"windowHours":[3],"eid":"' .. eid() .. '"}'
    end
    return wrk.format("POST", "/v1/incr/batch", {["Content-Type"] = "application/json"}, batch_head .. table.concat(items, ",") .. "]}")
  elseif mode == "batch" then
    local d = device()
    local items = {}
    for c = 1, 50 do
      items[c] = '{"cid":"c' .. c .. '","dims":{"device":"' .. d .. '"},"windowHours":[3]}'
    end
    return wrk.format("POST", "/v1/freq/batch", {["Content-Type"] = "application/json"}, batch_head .. table.concat(items, ",") .. "]}")
  elseif mode == "addfreq" then
    local body = '{"business_id":7,"key":"user:' .. math.random(0, fill - 1) .. '","time_span":86400,"time_unit":"TIME_UNIT_SEC"}'
    return wrk.format("POST", "/freqcap.v1.FrequencyControl/AddFreq", {["Content-Type"] = "application/json"}, body)
  elseif mode == "getbatch" then
    local reqs = {}
    for c = 1, 50 do
      reqs[c] = '{"business_id":7,"key":"user:' .. math.random(0, fill - 1) .. '"}'
    end
    return wrk.format("POST", "/freqcap.v1.FrequencyControl/BatchGetFreq", {["Content-Type"] = "application/json"}, '{"requests":[' .. table.concat(reqs, ",") .. "]}")
  elseif mode == "limit" then
    local body = '{"key":"user:' .. math.random(0, fill - 1) .. '","algorithm":"' .. algorithm .. '","limit":100,"period":"1m"}'
    return wrk.format("POST", "/v1/limit", {["Content-Type"] = "application/json"}, body)
  elseif mode == "decide" then
    return wrk.format("POST", "/v1/decide", {["Content-Type"] = "application/json"}, '{"identities":{"device":"' .. device() .. '","bundle":"com.hot"' .. decide_cands)
  elseif mode == "win" then
    return wrk.format("GET", "/win?cid=42&device=" .. device() .. "&tagid=e2e&eid=" .. eid())
  end
end
