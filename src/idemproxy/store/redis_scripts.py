"""Lua scripts of the Redis store: each state change is one script, so it is one round trip.

Redis runs a script atomically, so checking the state and fence, changing the record, moving it
in or out of the review zset and appending its outbox event can never be seen half done, and
no proxy can slip in between check and write. Times come from ``redis.call('TIME')`` rather than
from the caller, so that every proxy sharing the server agrees on whether a lease has run out.
Scripts are sent by EVALSHA (redis-py ``Script`` objects), so the source crosses the wire once
per server. Key names and hash fields are those of :mod:`idemproxy.store.layout`.
"""

from __future__ import annotations

# Shared by every writing script.
_PRELUDE = """
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- Lengthen a key's expiry, never shorten it: an index must outlive every record it lists.
-- PTTL is -1 for a key without expiry (just created) and -2 for a missing key.
local function extend_expiry(key, ttl_ms)
  local pttl = redis.call('PTTL', key)
  if pttl == -1 or (pttl >= 0 and pttl < ttl_ms) then
    redis.call('PEXPIRE', key, ttl_ms)
  end
end

-- Append the record's current state to the outbox. The stream id is the event id. Events
-- older than the retention are trimmed, and a stream of an agent gone quiet expires whole.
local function emit(record, stream, effect_id, event_type, now, retention_ms)
  local f = redis.call('HMGET', record, 'batch', 'tool_call', 'action', 'upstream', 'method',
    'path', 'status', 'ext', 'reason', 'state')
  redis.call('XADD', stream, 'MINID', '~', now - retention_ms, '*',
    'type', event_type, 'effect_id', effect_id,
    'batch', f[1] or '', 'tool_call', f[2] or '', 'action', f[3] or '', 'upstream', f[4] or '',
    'method', f[5] or '', 'path', f[6] or '', 'status', f[7] or '0', 'ext', f[8] or '',
    'reason', f[9] or '', 'ts', now, 'state', f[10] or '')
  redis.call('PEXPIRE', stream, retention_ms)
end
"""

# KEYS: record, outbox, unknown zset, batch set of the request's batch.
# ARGV: effect id, fingerprint, lease ms, ttl ms, batch, tool call, action, upstream, method,
#       path, event retention ms, reason written when an expired lease is found.
# Returns {1, fence} when claimed, else {0, fence, HGETALL of the record}: the caller gets the
# standing record, body included, in the same round trip, so a replay costs one.
CLAIM = (
    _PRELUDE
    + """
local record, stream, unknown, batch_set = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local effect_id, fingerprint = ARGV[1], ARGV[2]
local lease_ms, ttl_ms, retention_ms = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[11])
local now = now_ms()
local cur = redis.call('HMGET', record, 'state', 'fence', 'fp', 'lease_exp', 'created',
  'attempts')
local state = cur[1]
local fence, created, attempts = 0, now, 0
if state then
  fence = tonumber(cur[2])
  if state == 'in_flight' then
    if tonumber(cur[4]) <= now then
      -- The holder let its lease run out: it may have sent the request and died.
      redis.call('HSET', record, 'state', 'unknown', 'updated', now, 'reason', ARGV[12])
      redis.call('ZADD', unknown, now, effect_id)
      extend_expiry(unknown, redis.call('PTTL', record))
      emit(record, stream, effect_id, 'effect.unknown', now, retention_ms)
    end
    return {0, fence, redis.call('HGETALL', record)}
  end
  if state ~= 'not_applied' or cur[3] ~= fingerprint then
    if state == 'completed' and cur[3] == fingerprint then
      emit(record, stream, effect_id, 'effect.replayed', now, retention_ms)
    end
    return {0, fence, redis.call('HGETALL', record)}
  end
  -- A freed key taken again: keep its history, drop the old outcome.
  created, attempts = tonumber(cur[5]), tonumber(cur[6])
  redis.call('DEL', record)
end
redis.call('HSET', record, 'state', 'in_flight', 'fence', fence + 1, 'fp', fingerprint,
  'batch', ARGV[5], 'tool_call', ARGV[6], 'action', ARGV[7], 'upstream', ARGV[8],
  'method', ARGV[9], 'path', ARGV[10], 'lease_exp', now + lease_ms, 'created', created,
  'updated', now, 'attempts', attempts + 1, 'ext', '', 'reason', '', 'bkey', batch_set)
redis.call('PEXPIRE', record, ttl_ms)
-- A record that expired while unknown may have left its review entry behind.
redis.call('ZREM', unknown, effect_id)
redis.call('SADD', batch_set, effect_id)
extend_expiry(batch_set, ttl_ms)
return {1, fence + 1}
"""
)

# KEYS: record, outbox, unknown zset.
# ARGV: effect id, fence, new state, event type, ttl ms, event retention ms, external id,
#       reason, has response ('1' or '0'), status, headers, body, body truncated ('1' or '0').
# Returns 1 when written, 0 when the caller no longer holds the fence.
SETTLE = (
    _PRELUDE
    + """
local record, stream, unknown = KEYS[1], KEYS[2], KEYS[3]
local effect_id, state = ARGV[1], ARGV[3]
local ttl_ms, retention_ms = tonumber(ARGV[5]), tonumber(ARGV[6])
local cur = redis.call('HMGET', record, 'state', 'fence', 'bkey')
if cur[1] ~= 'in_flight' or tonumber(cur[2]) ~= tonumber(ARGV[2]) then
  return 0
end
local now = now_ms()
redis.call('HSET', record, 'state', state, 'updated', now, 'ext', ARGV[7], 'reason', ARGV[8])
if ARGV[9] == '1' then
  redis.call('HSET', record, 'status', ARGV[10], 'headers', ARGV[11], 'body', ARGV[12],
    'trunc', ARGV[13])
else
  redis.call('HDEL', record, 'status', 'headers', 'body', 'trunc')
end
redis.call('PEXPIRE', record, ttl_ms)
if state == 'unknown' then
  redis.call('ZADD', unknown, now, effect_id)
  extend_expiry(unknown, ttl_ms)
end
-- The batch set's name is read from the record because settle is not told the batch. It
-- carries the same hash tag as KEYS[1], so it lives in the same slot even on Redis Cluster.
if cur[3] then
  extend_expiry(cur[3], ttl_ms)
end
emit(record, stream, effect_id, ARGV[4], now, retention_ms)
return 1
"""
)

# KEYS: record, outbox, unknown zset.
# ARGV: effect id, expected state, new state, ttl ms, event retention ms, external id, reason,
#       has response ('1' or '0'), status, headers, body, body truncated ('1' or '0').
# Returns {1, HGETALL after} when resolved, {0, HGETALL as it stands} when refused ({} if none).
RESOLVE = (
    _PRELUDE
    + """
local record, stream, unknown = KEYS[1], KEYS[2], KEYS[3]
local effect_id, state = ARGV[1], ARGV[3]
local ttl_ms, retention_ms = tonumber(ARGV[4]), tonumber(ARGV[5])
local cur = redis.call('HMGET', record, 'state', 'fence', 'bkey')
if cur[1] ~= ARGV[2] then
  return {0, redis.call('HGETALL', record)}
end
local now = now_ms()
-- A higher fence drops the late settle of an attempt that still thinks it holds the key.
redis.call('HSET', record, 'state', state, 'fence', tonumber(cur[2]) + 1, 'lease_exp', 0,
  'updated', now, 'ext', ARGV[6], 'reason', ARGV[7])
if ARGV[8] == '1' then
  redis.call('HSET', record, 'status', ARGV[9], 'headers', ARGV[10], 'body', ARGV[11],
    'trunc', ARGV[12])
else
  redis.call('HDEL', record, 'status', 'headers', 'body', 'trunc')
end
redis.call('PEXPIRE', record, ttl_ms)
redis.call('ZREM', unknown, effect_id)
if cur[3] then
  extend_expiry(cur[3], ttl_ms)
end
emit(record, stream, effect_id, 'effect.resolved', now, retention_ms)
return {1, redis.call('HGETALL', record)}
"""
)

# KEYS: record. ARGV: fence, lease ms. Returns 1 when extended, 0 when not held.
RENEW = """
local cur = redis.call('HMGET', KEYS[1], 'state', 'fence')
if cur[1] ~= 'in_flight' or tonumber(cur[2]) ~= tonumber(ARGV[1]) then
  return 0
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('HSET', KEYS[1], 'lease_exp', now + tonumber(ARGV[2]))
return 1
"""

# Readers of an index fetch the listed records in one round trip. Entries go stale when a
# record expires (or is freed and claimed again under another batch); the script drops those in
# the same step, so a record re-created meanwhile keeps its entry.
# KEYS: the index, then record keys. ARGV: the effect ids, aligned with KEYS[2..].
# Returns one HGETALL per id, empty for a stale entry.
FETCH_UNKNOWN = """
local out = {}
for i = 2, #KEYS do
  if redis.call('HGET', KEYS[i], 'state') == 'unknown' then
    out[i - 1] = redis.call('HGETALL', KEYS[i])
  else
    redis.call('ZREM', KEYS[1], ARGV[i - 1])
    out[i - 1] = {}
  end
end
return out
"""

FETCH_BATCH = """
local out = {}
for i = 2, #KEYS do
  if redis.call('HGET', KEYS[i], 'bkey') == KEYS[1] then
    out[i - 1] = redis.call('HGETALL', KEYS[i])
  else
    redis.call('SREM', KEYS[1], ARGV[i - 1])
    out[i - 1] = {}
  end
end
return out
"""
