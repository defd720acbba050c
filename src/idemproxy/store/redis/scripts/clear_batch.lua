-- Deletes each listed record still not_applied at its fence, so the recovery may run again;
-- keeps the archive, if any (the batch is abandoned: batch.abandoned goes to the outbox), and
-- writes the audit entry. A deleted record's outcome leaves the batch's archive of outcomes
-- (named from the batch set, as settle names it).
-- KEYS: batch set, archive key, audit stream, outbox, delivery cursor, then the records of
-- ``id_fence_pairs``, aligned.
-- Returns the effect ids deleted.
local batch_set = KEYS[1]
local archive_key = KEYS[2]
local audit_stream = KEYS[3]
local stream = KEYS[4]
local cursor = KEYS[5]
local has_archive = ARGV[1]
local archive = ARGV[2]
local archive_retention_ms = tonumber(ARGV[3])
local audit_retention_ms = tonumber(ARGV[4])
local audit_action = ARGV[5]
local audit_actor = ARGV[6]
local audit_target = ARGV[7]
local audit_before = ARGV[8]
local audit_after = ARGV[9]
local audit_note = ARGV[10]
local event_retention_ms = tonumber(ARGV[11])
local event_batch = ARGV[12]
local event_reason = ARGV[13]
local id_fence_pairs = argv_from(14)  -- effect id, fence of each record

local cleared = {}
local first = 6  -- the first record's index in KEYS
for i = first, #KEYS do
  local effect_id = id_fence_pairs[1 + 2 * (i - first)]
  local fence = id_fence_pairs[2 + 2 * (i - first)]
  local cur = redis.call('HMGET', KEYS[i], '{{record.state}}', '{{record.fence}}',
    '{{record.batch_key}}')
  if cur[1] == 'not_applied' and cur[2] == fence and cur[3] == batch_set then
    redis.call('DEL', KEYS[i])
    redis.call('SREM', batch_set, effect_id)
    redis.call('HDEL', batch_set .. '{{outcomes.suffix}}', effect_id)
    cleared[#cleared + 1] = effect_id
  end
end
local now = now_ms()
if has_archive == '1' then
  redis.call('SET', archive_key, archive, 'PX', archive_retention_ms)
  outbox_add(stream, cursor, agent_fields(nil, '', event_batch, 'batch.abandoned', event_reason,
    'abandoned', now), now, event_retention_ms)
end
audit(audit_stream,
  {audit_action, audit_actor, audit_target, audit_before, audit_after, audit_note}, now,
  audit_retention_ms)
return cleared
