-- Turns each candidate still in flight with a lapsed lease unknown; drops stale lease entries.
-- KEYS: leases zset, outbox, review zset, delivery cursor, then the records of ``effect_ids``,
-- aligned.
-- Returns {effect id, HGETALL} of each record turned unknown.
local leases = KEYS[1]
local stream = KEYS[2]
local unknown = KEYS[3]
local cursor = KEYS[4]
local retention_ms = tonumber(ARGV[1])
local lapse_reason = ARGV[2]
local effect_ids = argv_from(3)

local now = now_ms()
local lapsed = {}
for i = 5, #KEYS do
  local effect_id = effect_ids[i - 4]
  local cur = redis.call('HMGET', KEYS[i], '{{record.state}}', '{{record.lease_expires_ms}}')
  if cur[1] ~= 'in_flight' then
    redis.call('ZREM', leases, effect_id)
  elseif tonumber(cur[2]) <= now then
    lapse(KEYS[i], stream, cursor, unknown, leases, effect_id, lapse_reason, now, retention_ms)
    lapsed[#lapsed + 1] = {effect_id, redis.call('HGETALL', KEYS[i])}
  end
end
return lapsed
