-- Set or clear the agent's pause by compare-and-set on the control's version, with the audit
-- entry and the outbox event (agent.paused or agent.resumed), and with the streak and snapshot
-- reset if asked.
-- Returns {0} when the version differs, else {1, control as control_reply gives it}.
local control = KEYS[1]
local streak = KEYS[2]
local snapshot = KEYS[3]
local audit_stream = KEYS[4]
local stream = KEYS[5]
local cursor = KEYS[6]
local version = tonumber(ARGV[1])
local set_pause = ARGV[2]  -- '1' sets a pause, '0' clears it
local origin = ARGV[3]
local reason = ARGV[4]
local actor = ARGV[5]
local reset_failures = ARGV[6]
local control_retention_ms = tonumber(ARGV[7])
local audit_retention_ms = tonumber(ARGV[8])
local audit_action = ARGV[9]
local audit_actor = ARGV[10]
local audit_target = ARGV[11]
local audit_before = ARGV[12]
local audit_after = ARGV[13]
local audit_note = ARGV[14]
local event_retention_ms = tonumber(ARGV[15])
local event_reason = ARGV[16]

local stored = tonumber(redis.call('HGET', control, '{{control.version}}') or '0')
if stored ~= version then
  return {0}
end
local now = now_ms()
if set_pause == '1' then
  redis.call('HSET', control, '{{control.paused}}', origin, '{{control.reason}}', reason,
    '{{control.actor}}', actor, '{{control.since}}', now)
else
  redis.call('HSET', control, '{{control.paused}}', '', '{{control.reason}}', '',
    '{{control.actor}}', '', '{{control.since}}', 0)
end
redis.call('HSET', control, '{{control.version}}', stored + 1)
redis.call('PEXPIRE', control, control_retention_ms)
if reset_failures == '1' then
  redis.call('DEL', streak, snapshot)
end
audit(audit_stream,
  {audit_action, audit_actor, audit_target, audit_before, audit_after, audit_note}, now,
  audit_retention_ms)
local event_type, event_state = 'agent.resumed', 'running'
if set_pause == '1' then
  event_type, event_state = 'agent.paused', 'paused'
end
outbox_add(stream, cursor, agent_fields(nil, '', '', event_type, event_reason, event_state, now),
  now, event_retention_ms)
return {1, control_reply(control, streak, snapshot)}
