-- The sweep's part (store/approvals.py ``lapsed``): each approved approval past its time turns
-- expired, with its event, up to ``limit``; entries of approvals no longer open are dropped.
-- KEYS: the open approvals zset, outbox, delivery cursor, then the approvals of
-- ``approval_ids``, aligned.
-- Returns the HGETALL of each approval turned expired.
local open = KEYS[1]
local stream = KEYS[2]
local cursor = KEYS[3]
local retention_ms = tonumber(ARGV[1])
local limit = tonumber(ARGV[2])
local approval_ids = argv_from(3)

local now = now_ms()
local expired = {}
for i = 4, #KEYS do
  local state = redis.call('HGET', KEYS[i], '{{approval.state}}')
  if state ~= 'awaiting_approval' and state ~= 'approved' then
    redis.call('ZREM', open, approval_ids[i - 3])
  elseif #expired < limit and approval_lapse(KEYS[i], now) then
    approval_emit(KEYS[i], stream, cursor, 'effect.approval_expired', now, retention_ms)
    expired[#expired + 1] = redis.call('HGETALL', KEYS[i])
    approval_keep(KEYS[i], open)
  end
end
return expired
