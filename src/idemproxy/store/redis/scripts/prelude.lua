-- Run before every script of the store. Each hash or stream field is written as its group and
-- name between double braces; the loader puts in the name store/redis/fields.py gives it.

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- ARGV from ``first`` on, as a table: a script's arguments of variable length, after its named
-- ones. Copied one by one, since unpack() fails past a few thousand values.
local function argv_from(first)
  local rest = {}
  for i = first, #ARGV do
    rest[#rest + 1] = ARGV[i]
  end
  return rest
end

-- Lengthen a key's expiry, never shorten it: an index must outlive every record it lists.
-- PTTL is -1 for a key without expiry (just created) and -2 for a missing key.
local function extend_expiry(key, ttl_ms)
  local pttl = redis.call('PTTL', key)
  if pttl == -1 or (pttl >= 0 and pttl < ttl_ms) then
    redis.call('PEXPIRE', key, ttl_ms)
  end
end

-- A record in flight (no outcome yet) or unknown (nobody knows whether the effect happened)
-- is held: it has no expiry, nor has the review zset listing it, since an expiry would free
-- the key and the next repeat would be sent again. Only an outcome starts the record's TTL.
-- (An empty zset is deleted by Redis itself, so a held index does not outlive its entries.)
local function hold(record, index)
  redis.call('PERSIST', record)
  redis.call('PERSIST', index)
end

-- The agent's fence counter hands out every fence, so that a key claimed again after its
-- record expired still gets a fence above the old one, and the late write of an attempt that
-- held the old one is refused. It outlives the records it numbered twice over.
local function next_fence(counter, above, ttl_ms)
  local fence = redis.call('INCR', counter)
  if fence <= above then
    fence = above + 1
    redis.call('SET', counter, fence, 'KEEPTTL')
  end
  extend_expiry(counter, 2 * ttl_ms)
  return fence
end

-- Append an event to the outbox. The stream id is the event id. Events older than the
-- retention are trimmed, and a stream of an agent gone quiet expires whole, except while a
-- recovery controller has not accepted them: an agent with a delivery cursor has one waiting,
-- and its events after ``acked`` are kept (and the cursor with them) until delivered, however
-- long that takes. write_cursor restores the expiry once all are accepted.
local function outbox_add(stream, cursor, fields, now, retention_ms)
  local minid = now - retention_ms
  local acked = redis.call('HGET', cursor, '{{cursor.acked}}')
  if acked then
    local acked_ms = tonumber(string.match(acked, '^(%d+)')) or 0
    if acked_ms < minid then
      minid = acked_ms
    end
  end
  redis.call('XADD', stream, 'MINID', '~', minid, '*', unpack(fields))
  if acked then
    redis.call('PERSIST', stream)
    redis.call('PERSIST', cursor)
  else
    redis.call('PEXPIRE', stream, retention_ms)
  end
end

-- Keep the outcome of a record whose TTL starts now in its batch's archive of outcomes
-- (store/outcomes.py), named from the batch set's name: the record's fields but its response,
-- as JSON. Times go as strings, since cjson would round numbers of that size. The archive
-- lives ``archive_retention_ms`` from its latest outcome. Held records are not archived.
local function archive_outcome(record, batch_set, effect_id, archive_retention_ms)
  local f = redis.call('HMGET', record, '{{record.state}}', '{{record.batch}}',
    '{{record.tool_call}}', '{{record.action}}', '{{record.upstream}}', '{{record.method}}',
    '{{record.path}}', '{{record.status}}', '{{record.external_id}}', '{{record.reason}}',
    '{{record.attempts}}', '{{record.created_ms}}', '{{record.updated_ms}}')
  if f[1] ~= 'completed' and f[1] ~= 'not_applied' then
    return
  end
  local outcome = cjson.encode({effect_id = effect_id, state = f[1], batch = f[2] or '',
    tool_call = f[3] or '', action = f[4] or '', upstream = f[5] or '', method = f[6] or '',
    path = f[7] or '', status = f[8] or '0', external_id = f[9] or '', reason = f[10] or '',
    attempts = f[11] or '0', created_ms = f[12] or '0', updated_ms = f[13] or '0'})
  local archive = batch_set .. '{{outcomes.suffix}}'
  redis.call('HSET', archive, effect_id, outcome)
  redis.call('PEXPIRE', archive, archive_retention_ms)
end

-- The fields of an event of the agent (store/records.py ``EventType``): of the effect that
-- caused it when ``record`` is given (else ``effect_id`` is '' and ``batch`` names the batch),
-- with its own reason and state.
local function agent_fields(record, effect_id, batch, event_type, reason, state, now)
  local f = {batch, '', '', '', '', ''}
  if record then
    f = redis.call('HMGET', record, '{{record.batch}}', '{{record.tool_call}}',
      '{{record.action}}', '{{record.upstream}}', '{{record.method}}', '{{record.path}}')
  end
  return {'{{event.type}}', event_type, '{{event.effect_id}}', effect_id,
    '{{event.batch}}', f[1] or '', '{{event.tool_call}}', f[2] or '',
    '{{event.action}}', f[3] or '', '{{event.upstream}}', f[4] or '',
    '{{event.method}}', f[5] or '', '{{event.path}}', f[6] or '',
    '{{event.status}}', '0', '{{event.external_id}}', '',
    '{{event.reason}}', reason, '{{event.ts_ms}}', now, '{{event.state}}', state}
end

-- Append the record's current state to the outbox; an effect turned unknown puts the agent
-- in error, which ``agent.error`` reports in the same step.
local function emit(record, stream, cursor, effect_id, event_type, now, retention_ms)
  local f = redis.call('HMGET', record, '{{record.batch}}', '{{record.tool_call}}',
    '{{record.action}}', '{{record.upstream}}', '{{record.method}}', '{{record.path}}',
    '{{record.status}}', '{{record.external_id}}', '{{record.reason}}', '{{record.state}}')
  outbox_add(stream, cursor, {
    '{{event.type}}', event_type, '{{event.effect_id}}', effect_id,
    '{{event.batch}}', f[1] or '', '{{event.tool_call}}', f[2] or '',
    '{{event.action}}', f[3] or '', '{{event.upstream}}', f[4] or '',
    '{{event.method}}', f[5] or '', '{{event.path}}', f[6] or '',
    '{{event.status}}', f[7] or '0', '{{event.external_id}}', f[8] or '',
    '{{event.reason}}', f[9] or '', '{{event.ts_ms}}', now, '{{event.state}}', f[10] or ''},
    now, retention_ms)
  if event_type == 'effect.unknown' then
    outbox_add(stream, cursor, agent_fields(record, effect_id, '', 'agent.error', f[9] or '',
      f[10] or '', now), now, retention_ms)
  end
end

-- An in-flight record whose holder let its lease run out: it may have sent the request and
-- died, so the outcome is unknown and goes to review.
local function lapse(record, stream, cursor, unknown, leases, effect_id, reason, now,
    retention_ms)
  redis.call('HSET', record, '{{record.state}}', 'unknown', '{{record.updated_ms}}', now,
    '{{record.reason}}', reason)
  hold(record, unknown)
  redis.call('ZREM', leases, effect_id)
  redis.call('ZADD', unknown, now, effect_id)
  emit(record, stream, cursor, effect_id, 'effect.unknown', now, retention_ms)
end

-- Append an operator action to the agent's audit stream; the entry's time is its stream id's.
-- ``a`` holds action, actor, target, before, after, note.
local function audit(stream, a, now, retention_ms)
  redis.call('XADD', stream, 'MINID', '~', now - retention_ms, '*', '{{audit.action}}', a[1],
    '{{audit.actor}}', a[2], '{{audit.target}}', a[3], '{{audit.before}}', a[4],
    '{{audit.after}}', a[5], '{{audit.note}}', a[6])
  redis.call('PEXPIRE', stream, retention_ms)
end

-- An agent's control hash and its two lists of failed attempts, in one reply.
local function control_reply(control, streak, snapshot)
  return {redis.call('HGETALL', control), redis.call('LRANGE', streak, 0, -1),
    redis.call('LRANGE', snapshot, 0, -1)}
end

-- Append an approval's event (store/approvals.py): the approval as it is at that point of the
-- step (``Change.told``), and approval_extra's fields as JSON.
local function approval_emit(approval, stream, cursor, event_type, now, retention_ms)
  local f = redis.call('HMGET', approval, '{{approval.effect_id}}', '{{approval.batch}}',
    '{{approval.tool_call}}', '{{approval.action}}', '{{approval.upstream}}',
    '{{approval.method}}', '{{approval.path}}', '{{approval.note}}', '{{approval.state}}',
    '{{approval.id}}', '{{approval.rule}}', '{{approval.actor}}', '{{approval.valid_until_ms}}')
  local extra = {approval_id = f[10], rule = f[11]}
  if f[12] ~= '' then
    extra.actor = f[12]
  end
  if f[13] ~= '0' then
    extra.valid_until_ms = f[13]
  end
  outbox_add(stream, cursor, {'{{event.type}}', event_type, '{{event.effect_id}}', f[1],
    '{{event.batch}}', f[2], '{{event.tool_call}}', f[3], '{{event.action}}', f[4],
    '{{event.upstream}}', f[5], '{{event.method}}', f[6], '{{event.path}}', f[7],
    '{{event.status}}', '0', '{{event.external_id}}', '', '{{event.reason}}', f[8],
    '{{event.ts_ms}}', now, '{{event.state}}', f[9], '{{event.extra}}', cjson.encode(extra)},
    now, retention_ms)
end

-- An approved approval not used in time turns expired (store/approvals.py ``lapsed``);
-- returns whether it did.
local function approval_lapse(approval, now)
  local f = redis.call('HMGET', approval, '{{approval.state}}', '{{approval.valid_until_ms}}')
  if f[1] ~= 'approved' or now < tonumber(f[2]) then
    return false
  end
  redis.call('HSET', approval, '{{approval.state}}', 'expired')
  return true
end

-- Keep an approval as store/approvals.py ``expires_ms`` says: an open one for ever, listed
-- among the open ones by when it was asked for; a settled one ``keep`` ms, unlisted. Run last,
-- since a settled one kept 0 ms is gone at once.
local function approval_keep(approval, open)
  local f = redis.call('HMGET', approval, '{{approval.state}}', '{{approval.id}}',
    '{{approval.requested_ms}}', '{{approval.keep_ms}}')
  if f[1] == 'awaiting_approval' or f[1] == 'approved' then
    redis.call('PERSIST', approval)
    redis.call('ZADD', open, tonumber(f[3]), f[2])
    return
  end
  redis.call('ZREM', open, f[2])
  if tonumber(f[4]) > 0 then
    redis.call('PEXPIRE', approval, tonumber(f[4]))
  else
    redis.call('DEL', approval)
  end
end
