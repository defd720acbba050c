-- Write the delivery cursor by compare-and-set on its version, with an audit entry if any.
-- While events wait after ``acked`` the cursor and the outbox are kept without expiry (see
-- emit); once the controller has accepted the last event both expire as usual again.
-- Returns 1 when written, 0 when the stored version differs.
local cursor = KEYS[1]
local audit_stream = KEYS[2]
local stream = KEYS[3]
local version = tonumber(ARGV[1])
local retention_ms = tonumber(ARGV[2])
local has_audit = ARGV[3]
local audit_retention_ms = tonumber(ARGV[4])
local audit_action = ARGV[5]
local audit_actor = ARGV[6]
local audit_target = ARGV[7]
local audit_before = ARGV[8]
local audit_after = ARGV[9]
local audit_note = ARGV[10]
local fields = argv_from(11)  -- the cursor's fields as name, value pairs

local stored = tonumber(redis.call('HGET', cursor, '{{cursor.version}}') or '0')
if stored ~= version then
  return 0
end
redis.call('HSET', cursor, '{{cursor.version}}', stored + 1)
for i = 1, #fields, 2 do
  redis.call('HSET', cursor, fields[i], fields[i + 1])
end
local last = redis.call('XREVRANGE', stream, '+', '-', 'COUNT', 1)
if #last == 0 or last[1][1] == redis.call('HGET', cursor, '{{cursor.acked}}') then
  redis.call('PEXPIRE', cursor, retention_ms)
  if #last > 0 then
    redis.call('PEXPIRE', stream, retention_ms)
  end
else
  redis.call('PERSIST', cursor)
  redis.call('PERSIST', stream)
end
if has_audit == '1' then
  audit(audit_stream,
    {audit_action, audit_actor, audit_target, audit_before, audit_after, audit_note}, now_ms(),
    audit_retention_ms)
end
return 1
