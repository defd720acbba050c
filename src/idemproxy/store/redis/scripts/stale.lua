-- Returns {before, then the agents of each worklist in KEYS}: at most ``limit`` of each listed
-- at ``before`` (now minus the grace) or earlier, oldest first.
local grace_ms = tonumber(ARGV[1])
local limit = tonumber(ARGV[2])

local before = now_ms() - grace_ms
local reply = {before}
for k = 1, #KEYS do
  reply[k + 1] = redis.call('ZRANGEBYSCORE', KEYS[k], '-inf', before, 'LIMIT', 0, limit)
end
return reply
