-- Use an approval for one attempt (store/approvals.py ``taken`` and ``take_answer``): an
-- approved one turns used, or expired (with its event) if past its time.
-- Returns {0} when there is none or another take used it, else {1, its HGETALL}.
local approval = KEYS[1]
local open = KEYS[2]
local stream = KEYS[3]
local cursor = KEYS[4]
local retention_ms = tonumber(ARGV[1])

local state = redis.call('HGET', approval, '{{approval.state}}')
if not state or state == 'used' then
  return {0}
end
if state ~= 'approved' then
  return {1, redis.call('HGETALL', approval)}
end
local now = now_ms()
if approval_lapse(approval, now) then
  approval_emit(approval, stream, cursor, 'effect.approval_expired', now, retention_ms)
else
  redis.call('HSET', approval, '{{approval.state}}', 'used')
end
local reply = redis.call('HGETALL', approval)
approval_keep(approval, open)
return {1, reply}
