-- Returns {before, review agents, delivery agents}: at most ``limit`` of each listed at
-- ``before`` (now minus the grace) or earlier, oldest first.
local review = KEYS[1]
local delivery = KEYS[2]
local grace_ms = tonumber(ARGV[1])
local limit = tonumber(ARGV[2])

local before = now_ms() - grace_ms
return {before, redis.call('ZRANGEBYSCORE', review, '-inf', before, 'LIMIT', 0, limit),
  redis.call('ZRANGEBYSCORE', delivery, '-inf', before, 'LIMIT', 0, limit)}
