-- Drops registry members seen at or before ``seen_before_ms``; past ``cap``, the least
-- recently seen go too. Returns how many the cap dropped.
local registry = KEYS[1]
local seen_before_ms = ARGV[1]
local cap = tonumber(ARGV[2])

redis.call('ZREMRANGEBYSCORE', registry, '-inf', seen_before_ms)
local over = redis.call('ZCARD', registry) - cap
if over <= 0 then
  return 0
end
redis.call('ZREMRANGEBYRANK', registry, 0, over - 1)
return over
