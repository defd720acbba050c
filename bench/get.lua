-- Safe pass-through: a GET of the path in BENCH_PATH.
local path = os.getenv("BENCH_PATH") or "/up/api/messages"
request = function()
  return wrk.format("GET", path, {["Accept"] = "application/json"})
end
