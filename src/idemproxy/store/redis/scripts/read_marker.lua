-- Returns {HGETALL marker, HGETALL loss, EXISTS log, now ms}.
local marker = KEYS[1]
local loss = KEYS[2]
local log = KEYS[3]

return {redis.call('HGETALL', marker), redis.call('HGETALL', loss), redis.call('EXISTS', log),
  now_ms()}
