-- POST a tool call. BENCH_MODE=first: a fresh tool call per request (first calls);
-- BENCH_MODE=replay: one tool call again and again (the bench records it before the cell).
-- Both proxies get the same headers: the reference keys on Idempotency-Key, idemproxy on
-- Idem-Batch + Idem-Tool-Call.
local run = os.getenv("BENCH_RUN") or "run"
local replay = os.getenv("BENCH_MODE") == "replay"
local counter = 0
request = function()
  counter = counter + 1
  local call = "replay-" .. run
  if not replay then
    call = string.format("%s-%d-%d", run, math.random(1, 1e9), counter)
  end
  return wrk.format("POST", "/up/api/messages", {
    ["Content-Type"] = "application/json",
    ["Idempotency-Key"] = call,
    ["Idem-Batch"] = "b-" .. run,
    ["Idem-Tool-Call"] = call,
  }, '{"content":"hello world"}')
end
