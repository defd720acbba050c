-- Lists each agent on both worklists as of now (Redis's clock, so every proxy agrees on how
-- long ago an agent was listed).
local review = KEYS[1]
local delivery = KEYS[2]
local agents = argv_from(1)

local now = now_ms()
for i = 1, #agents do
  redis.call('ZADD', review, now, agents[i])
  redis.call('ZADD', delivery, now, agents[i])
end
return #agents
