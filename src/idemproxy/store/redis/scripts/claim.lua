-- Take a record's key for one attempt.
-- Returns {1, fence, created ms} when claimed, else {0, fence, HGETALL of the record}: the
-- caller gets the standing record, body included, in the same round trip, so a replay costs
-- one; {0, fence, HGETALL, 1} when this claim found the lease run out and turned it unknown. A claim that would take the key of a paused agent returns {2, fence, origin, reason,
-- actor, since}: the pause check rides on the claim, so it costs no round trip of its own. A
-- store whose marker is not the one the proxy last saw (it was emptied, or restarted without
-- its data, since) returns {3} before anything is read or written: on such a store a repeat of
-- a forgotten effect would look new.
local record = KEYS[1]
local stream = KEYS[2]
local unknown = KEYS[3]
local batch_set = KEYS[4]  -- of the request's batch
local leases = KEYS[5]
local control = KEYS[6]
local fence_counter = KEYS[7]
local cursor = KEYS[8]
local batches = KEYS[9]  -- the agent's listing of its batches
local marker = KEYS[10]  -- absent on Redis Cluster, where it lives in another slot
local effect_id = ARGV[1]
local fingerprint = ARGV[2]
local lease_ms = tonumber(ARGV[3])
local ttl_ms = tonumber(ARGV[4])
local batch = ARGV[5]
local tool_call = ARGV[6]
local action = ARGV[7]
local upstream = ARGV[8]
local method = ARGV[9]
local path = ARGV[10]
local retention_ms = tonumber(ARGV[11])
local lapse_reason = ARGV[12]  -- written when an expired lease is found
local ignore_pause = ARGV[13]
local reworded_may_reclaim = ARGV[14]  -- take a freed key under another fingerprint
local epoch = ARGV[15]  -- the marker's, as the proxy last saw it ('' to not compare)
local batches_kept = tonumber(ARGV[16])
local batches_retention_ms = tonumber(ARGV[17])

if epoch ~= '' and redis.call('HGET', marker, '{{marker.epoch}}') ~= epoch then
  return {3}
end
local now = now_ms()
local cur = redis.call('HMGET', record, '{{record.state}}', '{{record.fence}}',
  '{{record.fingerprint}}', '{{record.lease_expires_ms}}', '{{record.created_ms}}',
  '{{record.attempts}}')
local state = cur[1]
local fence, created, attempts = 0, now, 0
if state then
  fence = tonumber(cur[2])
  if state == 'in_flight' then
    if tonumber(cur[4]) <= now then
      -- The holder let its lease run out: it may have sent the request and died.
      lapse(record, stream, cursor, unknown, leases, effect_id, lapse_reason, now, retention_ms)
      return {0, fence, redis.call('HGETALL', record), 1}
    end
    return {0, fence, redis.call('HGETALL', record)}
  end
  if state ~= 'not_applied' or (cur[3] ~= fingerprint and reworded_may_reclaim ~= '1') then
    if state == 'completed' and cur[3] == fingerprint then
      emit(record, stream, cursor, effect_id, 'effect.replayed', now, retention_ms)
    end
    return {0, fence, redis.call('HGETALL', record)}
  end
  -- A freed key taken again: keep its history, drop the old outcome.
  created, attempts = tonumber(cur[5]), tonumber(cur[6])
end
if ignore_pause ~= '1' then
  local pause = redis.call('HMGET', control, '{{control.paused}}', '{{control.reason}}',
    '{{control.actor}}', '{{control.since}}')
  if pause[1] and pause[1] ~= '' then
    return {2, fence, pause[1], pause[2], pause[3], pause[4]}
  end
end
if state then
  redis.call('DEL', record)
end
fence = next_fence(fence_counter, fence, ttl_ms)
-- Created without an expiry: the attempt is held until its outcome is written.
redis.call('HSET', record, '{{record.state}}', 'in_flight', '{{record.fence}}', fence,
  '{{record.fingerprint}}', fingerprint, '{{record.batch}}', batch,
  '{{record.tool_call}}', tool_call, '{{record.action}}', action,
  '{{record.upstream}}', upstream, '{{record.method}}', method, '{{record.path}}', path,
  '{{record.lease_expires_ms}}', now + lease_ms, '{{record.created_ms}}', created,
  '{{record.updated_ms}}', now, '{{record.attempts}}', attempts + 1,
  '{{record.external_id}}', '', '{{record.reason}}', '', '{{record.batch_key}}', batch_set)
-- A record that expired while unknown (before unknown records were held) may have left its
-- review entry behind.
redis.call('ZREM', unknown, effect_id)
redis.call('SADD', batch_set, effect_id)
extend_expiry(batch_set, ttl_ms)
if batch ~= '' then
  -- LT: a freed key claimed again into another batch brings its first claim's time along.
  if redis.call('ZADD', batches, 'LT', created, batch) == 1 then
    redis.call('ZREMRANGEBYRANK', batches, 0, -(batches_kept + 1))
  end
  -- Longer than any record's TTL can reach (an outcome restarts it): the listing checks each
  -- batch it returns and drops those whose set is gone.
  extend_expiry(batches, batches_retention_ms)
end
redis.call('ZADD', leases, now + lease_ms, effect_id)
redis.call('PERSIST', leases)
return {1, fence, created}
