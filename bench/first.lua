-- First calls: a fresh tool call per request. The same headers go to both proxies; the
-- reference keys on Idempotency-Key, idemproxy on Idem-Batch + Idem-Tool-Call.
local run = os.getenv("BENCH_RUN") or "run"
local counter = 0
request = function()
  counter = counter + 1
  local call = string.format("%s-%d-%d", run, math.random(1, 1e9), counter)
  return wrk.format("POST", "/up/api/messages", {
    ["Content-Type"] = "application/json",
    ["Idempotency-Key"] = call,
    ["Idem-Batch"] = "b-" .. run,
    ["Idem-Tool-Call"] = call,
  }, '{"content":"hello world"}')
end
