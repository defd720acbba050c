-- An operator's decision (store/approvals.py ``decided``): compare-and-set from
-- awaiting_approval to approved (usable its valid_ms from now) or denied, with the audit entry and
-- the outbox event.
-- Returns {} when the approval does not await a decision, else its HGETALL as decided.
local approval = KEYS[1]
local open = KEYS[2]
local audit_stream = KEYS[3]
local stream = KEYS[4]
local cursor = KEYS[5]
local approve = ARGV[1]
local actor = ARGV[2]
local note = ARGV[3]
local audit_retention_ms = tonumber(ARGV[4])
local audit_action = ARGV[5]
local audit_actor = ARGV[6]
local audit_target = ARGV[7]
local audit_before = ARGV[8]
local audit_after = ARGV[9]
local audit_note = ARGV[10]
local retention_ms = tonumber(ARGV[11])

if redis.call('HGET', approval, '{{approval.state}}') ~= 'awaiting_approval' then
  return {}
end
local now = now_ms()
local state, valid_until, event_type = 'denied', 0, 'effect.denied'
if approve == '1' then
  -- Usable for the rule's approval_ttl_s, which the hold kept with the approval.
  local valid_ms = tonumber(redis.call('HGET', approval, '{{approval.valid_ms}}')) or 0
  state, valid_until, event_type = 'approved', now + valid_ms, 'effect.approved'
end
redis.call('HSET', approval, '{{approval.state}}', state, '{{approval.decided_ms}}', now,
  '{{approval.valid_until_ms}}', valid_until, '{{approval.actor}}', actor,
  '{{approval.note}}', note)
audit(audit_stream,
  {audit_action, audit_actor, audit_target, audit_before, audit_after, audit_note}, now,
  audit_retention_ms)
approval_emit(approval, stream, cursor, event_type, now, retention_ms)
local reply = redis.call('HGETALL', approval)
approval_keep(approval, open)
return reply
