-- The attempt that holds the fence writes its own outcome; with the agent's failures counted
-- (store/control.py) when ``streak_pause_after`` is above 0.
-- Returns 1 when written, 0 when the caller no longer holds the fence.
local record = KEYS[1]
local stream = KEYS[2]
local unknown = KEYS[3]
local leases = KEYS[4]
local control = KEYS[5]
local streak = KEYS[6]
local snapshot = KEYS[7]
local audit_stream = KEYS[8]
local cursor = KEYS[9]
local effect_id = ARGV[1]
local fence = ARGV[2]
local state = ARGV[3]
local event_type = ARGV[4]
local ttl_ms = tonumber(ARGV[5])
local retention_ms = tonumber(ARGV[6])
local external_id = ARGV[7]
local reason = ARGV[8]
local response_present = ARGV[9]
local response_status = ARGV[10]
local response_headers = ARGV[11]
local response_body = ARGV[12]
local response_truncated = ARGV[13]
local streak_pause_after = tonumber(ARGV[14])  -- failures in a row that pause (0: do not count)
local streak_failed = ARGV[15]
local streak_error = ARGV[16]
local streak_agent = ARGV[17]
local streak_control_retention_ms = tonumber(ARGV[18])
local streak_audit_retention_ms = tonumber(ARGV[19])
local streak_longest = tonumber(ARGV[20])  -- the longest streak kept
local archive_retention_ms = tonumber(ARGV[21])

-- A failure joins the streak (and, while the agent is paused automatically, its snapshot); a
-- success clears it. The failure that makes the streak long enough copies it into the snapshot
-- and only then pauses the agent, with an audit entry: all in the settle's one step. The words
-- of the reason are those of store/control.py.
local function count_outcome(entry, now)
  if streak_failed ~= '1' then
    redis.call('DEL', streak)
    return
  end
  local n = redis.call('RPUSH', streak, entry)
  if n > streak_longest then
    redis.call('LTRIM', streak, -streak_longest, -1)
    n = streak_longest
  end
  redis.call('PEXPIRE', streak, streak_control_retention_ms)
  local paused = redis.call('HGET', control, '{{control.paused}}')
  if paused == 'auto' then
    redis.call('RPUSH', snapshot, entry)
    redis.call('PEXPIRE', snapshot, streak_control_retention_ms)
    redis.call('HINCRBY', control, '{{control.version}}', 1)
    redis.call('PEXPIRE', control, streak_control_retention_ms)
  elseif (not paused or paused == '') and n >= streak_pause_after then
    redis.call('DEL', snapshot)
    redis.call('RPUSH', snapshot, unpack(redis.call('LRANGE', streak, 0, -1)))
    redis.call('PEXPIRE', snapshot, streak_control_retention_ms)
    local pause_reason = 'auto-paused after ' .. n .. ' consecutive failures. Last error: '
      .. streak_error
    redis.call('HSET', control, '{{control.paused}}', 'auto', '{{control.reason}}', pause_reason,
      '{{control.actor}}', 'idemproxy', '{{control.since}}', now)
    redis.call('HINCRBY', control, '{{control.version}}', 1)
    redis.call('PEXPIRE', control, streak_control_retention_ms)
    audit(audit_stream,
      {'agent.auto_pause', 'idemproxy', streak_agent, 'running', 'paused', pause_reason}, now,
      streak_audit_retention_ms)
    outbox_add(stream, cursor, agent_fields(record, effect_id, '', 'agent.paused',
      pause_reason, 'paused', now), now, retention_ms)
  end
end

local cur = redis.call('HMGET', record, '{{record.state}}', '{{record.fence}}',
  '{{record.batch_key}}')
if cur[1] ~= 'in_flight' or tonumber(cur[2]) ~= tonumber(fence) then
  return 0
end
redis.call('ZREM', leases, effect_id)
local now = now_ms()
redis.call('HSET', record, '{{record.state}}', state, '{{record.updated_ms}}', now,
  '{{record.external_id}}', external_id, '{{record.reason}}', reason)
if response_present == '1' then
  redis.call('HSET', record, '{{record.status}}', response_status,
    '{{record.headers}}', response_headers, '{{record.body}}', response_body,
    '{{record.truncated}}', response_truncated)
else
  redis.call('HDEL', record, '{{record.status}}', '{{record.headers}}', '{{record.body}}',
    '{{record.truncated}}')
end
if state == 'unknown' then
  hold(record, unknown)
  redis.call('ZADD', unknown, now, effect_id)
else
  redis.call('PEXPIRE', record, ttl_ms)
end
-- The batch set's name is read from the record because settle is not told the batch. It
-- carries the same hash tag as the record, so it lives in the same slot even on Redis Cluster.
if cur[3] then
  extend_expiry(cur[3], ttl_ms)
  archive_outcome(record, cur[3], effect_id, archive_retention_ms)
end
emit(record, stream, cursor, effect_id, event_type, now, retention_ms)
if streak_pause_after > 0 then
  count_outcome(fence .. ' ' .. effect_id, now)
end
return 1
