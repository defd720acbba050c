-- Replays: one tool call sent again and again (the first request records it).
local run = os.getenv("BENCH_RUN") or "run"
local call = "replay-" .. run
request = function()
  return wrk.format("POST", "/up/api/messages", {
    ["Content-Type"] = "application/json",
    ["Idempotency-Key"] = call,
    ["Idem-Batch"] = "b-" .. run,
    ["Idem-Tool-Call"] = call,
  }, '{"content":"hello world"}')
end
