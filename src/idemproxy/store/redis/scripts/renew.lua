-- Extend the lease of an attempt that still holds the fence.
-- Returns 1 when extended, 0 when not held.
local record = KEYS[1]
local leases = KEYS[2]
local fence = ARGV[1]
local lease_ms = tonumber(ARGV[2])
local effect_id = ARGV[3]

local cur = redis.call('HMGET', record, '{{record.state}}', '{{record.fence}}')
if cur[1] ~= 'in_flight' or tonumber(cur[2]) ~= tonumber(fence) then
  return 0
end
local now = now_ms()
redis.call('HSET', record, '{{record.lease_expires_ms}}', now + lease_ms)
redis.call('ZADD', leases, now + lease_ms, effect_id)
return 1
