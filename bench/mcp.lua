-- POST an MCP tools/call as the official SDK's stateless (2026-07-28) client sends it, to the
-- path in the URL wrk was given. BENCH_MODE=first: a fresh tool call per request, with id 2
-- (the SDK's first call after its server/discover probe; the upstream's fixed answer carries
-- it); BENCH_MODE=replay: one tool call again and again (the bench records it before the cell),
-- each with an id of its own, which idemproxy writes into the recorded answer.
-- idemproxy keys on params._meta (dev.idemproxy/batch + dev.idemproxy/toolCall), the reference
-- on the Idempotency-Key header: both carry the same call id, and both proxies get these bytes.
-- bench/toolcall.py builds the same request for the record a replay cell replays.
local run = os.getenv("BENCH_RUN") or "run"
local replay = os.getenv("BENCH_MODE") == "replay"
local counter = 0
request = function()
  counter = counter + 1
  local call, id = "replay-" .. run, counter + 2
  if not replay then
    call, id = string.format("%s-%d-%d", run, math.random(1, 1e9), counter), 2
  end
  local body = '{"jsonrpc":"2.0","id":' .. id .. ',"method":"tools/call","params":{"_meta":{'
    .. '"dev.idemproxy/batch":"b-' .. run .. '","dev.idemproxy/toolCall":"' .. call .. '",'
    .. '"io.modelcontextprotocol/protocolVersion":"2026-07-28",'
    .. '"io.modelcontextprotocol/clientInfo":{"name":"mcp","version":"0.1.0"},'
    .. '"io.modelcontextprotocol/clientCapabilities":{}},'
    .. '"name":"send_message","arguments":{"content":"hello world"}}}'
  return wrk.format("POST", nil, {
    ["Accept"] = "application/json, text/event-stream",
    ["Content-Type"] = "application/json",
    ["Mcp-Protocol-Version"] = "2026-07-28",
    ["Mcp-Method"] = "tools/call",
    ["Mcp-Name"] = "send_message",
    ["Idempotency-Key"] = call,
  }, body)
end
