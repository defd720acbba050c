-- Ask for approval (store/approvals.py ``held``): open one where there is none; ask again for
-- one used or expired (one approved and past its time expires first); else leave it be.
-- Returns the approval's HGETALL as the step leaves it.
local approval = KEYS[1]
local open = KEYS[2]
local stream = KEYS[3]
local cursor = KEYS[4]
local approval_id = ARGV[1]
local effect_id = ARGV[2]
local fingerprint = ARGV[3]
local batch = ARGV[4]
local tool_call = ARGV[5]
local action = ARGV[6]
local upstream = ARGV[7]
local method = ARGV[8]
local path = ARGV[9]
local rule = ARGV[10]
local summary = ARGV[11]
local keep_ms = tonumber(ARGV[12])
local valid_ms = tonumber(ARGV[13])
local retention_ms = tonumber(ARGV[14])

local now = now_ms()
local state = redis.call('HGET', approval, '{{approval.state}}')
local events = {}
local changed = false
if not state then
  redis.call('HSET', approval, '{{approval.id}}', approval_id,
    '{{approval.effect_id}}', effect_id, '{{approval.fingerprint}}', fingerprint,
    '{{approval.batch}}', batch, '{{approval.tool_call}}', tool_call,
    '{{approval.action}}', action, '{{approval.upstream}}', upstream,
    '{{approval.method}}', method, '{{approval.path}}', path,
    '{{approval.state}}', 'awaiting_approval', '{{approval.rule}}', rule,
    '{{approval.summary}}', summary, '{{approval.requested_ms}}', now,
    '{{approval.decided_ms}}', 0, '{{approval.valid_until_ms}}', 0, '{{approval.actor}}', '',
    '{{approval.note}}', '', '{{approval.keep_ms}}', keep_ms, '{{approval.requests}}', 1,
    '{{approval.valid_ms}}', valid_ms)
  events[1] = 'effect.approval_requested'
else
  if approval_lapse(approval, now) then
    -- Told now, as it expired (who approved it, until when), before the hash is asked anew.
    approval_emit(approval, stream, cursor, 'effect.approval_expired', now, retention_ms)
    changed = true
    state = 'expired'
  end
  if state == 'used' or state == 'expired' then
    redis.call('HSET', approval, '{{approval.state}}', 'awaiting_approval',
      '{{approval.requested_ms}}', now, '{{approval.decided_ms}}', 0,
      '{{approval.valid_until_ms}}', 0, '{{approval.actor}}', '', '{{approval.note}}', '')
    redis.call('HINCRBY', approval, '{{approval.requests}}', 1)
    events[#events + 1] = 'effect.approval_requested'
  end
end
for i = 1, #events do
  approval_emit(approval, stream, cursor, events[i], now, retention_ms)
end
local reply = redis.call('HGETALL', approval)
if changed or #events > 0 then
  approval_keep(approval, open)
end
return reply
