-- Lists each agent on every worklist in KEYS as of now (Redis's clock, so every proxy agrees
-- on how long ago an agent was listed).
local agents = argv_from(1)

local now = now_ms()
for i = 1, #agents do
  for k = 1, #KEYS do
    redis.call('ZADD', KEYS[k], now, agents[i])
  end
end
return #agents
