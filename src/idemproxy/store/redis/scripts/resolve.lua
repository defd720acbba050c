-- Close a record by compare-and-set: its state must be ``expected_state`` (and its fence
-- ``expected_fence``, unless that is '').
-- Returns {1, HGETALL after} when resolved, {0, HGETALL as it stands} when refused ({} if none).
local record = KEYS[1]
local stream = KEYS[2]
local unknown = KEYS[3]
local leases = KEYS[4]
local audit_stream = KEYS[5]
local fence_counter = KEYS[6]
local cursor = KEYS[7]
local effect_id = ARGV[1]
local expected_state = ARGV[2]
local state = ARGV[3]
local ttl_ms = tonumber(ARGV[4])
local retention_ms = tonumber(ARGV[5])
local external_id = ARGV[6]
local reason = ARGV[7]
local response_present = ARGV[8]
local response_status = ARGV[9]
local response_headers = ARGV[10]
local response_body = ARGV[11]
local response_truncated = ARGV[12]
local has_audit = ARGV[13]
local audit_retention_ms = tonumber(ARGV[14])
local audit_action = ARGV[15]
local audit_actor = ARGV[16]
local audit_target = ARGV[17]
local audit_before = ARGV[18]
local audit_after = ARGV[19]
local audit_note = ARGV[20]
local expected_fence = ARGV[21]
local archive_retention_ms = tonumber(ARGV[22])

local cur = redis.call('HMGET', record, '{{record.state}}', '{{record.fence}}',
  '{{record.batch_key}}')
if cur[1] ~= expected_state
    or (expected_fence ~= '' and tonumber(cur[2]) ~= tonumber(expected_fence)) then
  return {0, redis.call('HGETALL', record)}
end
local now = now_ms()
-- A higher fence drops the late settle of an attempt that still thinks it holds the key.
local fence = next_fence(fence_counter, tonumber(cur[2]), ttl_ms)
redis.call('HSET', record, '{{record.state}}', state, '{{record.fence}}', fence,
  '{{record.lease_expires_ms}}', 0, '{{record.updated_ms}}', now,
  '{{record.external_id}}', external_id, '{{record.reason}}', reason)
if response_present == '1' then
  redis.call('HSET', record, '{{record.status}}', response_status,
    '{{record.headers}}', response_headers, '{{record.body}}', response_body,
    '{{record.truncated}}', response_truncated)
else
  redis.call('HDEL', record, '{{record.status}}', '{{record.headers}}', '{{record.body}}',
    '{{record.truncated}}')
end
redis.call('PEXPIRE', record, ttl_ms)
redis.call('ZREM', unknown, effect_id)
redis.call('ZREM', leases, effect_id)
if cur[3] then
  extend_expiry(cur[3], ttl_ms)
  archive_outcome(record, cur[3], effect_id, archive_retention_ms)
end
emit(record, stream, cursor, effect_id, 'effect.resolved', now, retention_ms)
if has_audit == '1' then
  audit(audit_stream,
    {audit_action, audit_actor, audit_target, audit_before, audit_after, audit_note}, now,
    audit_retention_ms)
end
return {1, redis.call('HGETALL', record)}
