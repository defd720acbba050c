"""Lua scripts of the Redis store: each state change is one script, so it is one round trip.

Redis runs a script atomically, so checking the state and fence, changing the record, moving it
in or out of the review zset and appending its outbox event can never be seen half done, and
no proxy can slip in between check and write. Times come from ``redis.call('TIME')`` rather than
from the caller, so that every proxy sharing the server agrees on whether a lease has run out.
Scripts are sent by EVALSHA (redis-py ``Script`` objects), so the source crosses the wire once
per server. Key names and hash fields are those of :mod:`idemproxy.store.redis.keys`.
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

-- Append the record's current state to the outbox. The stream id is the event id. Events
-- older than the retention are trimmed, and a stream of an agent gone quiet expires whole,
-- except while a recovery controller has not accepted them: an agent with a delivery cursor
-- has one waiting, and its events after ``acked`` are kept (and the cursor with them) until
-- delivered, however long that takes. WRITE_CURSOR restores the expiry once all are accepted.
local function emit(record, stream, cursor, effect_id, event_type, now, retention_ms)
  local f = redis.call('HMGET', record, 'batch', 'tool_call', 'action', 'upstream', 'method',
    'path', 'status', 'ext', 'reason', 'state')
  local minid = now - retention_ms
  local acked = redis.call('HGET', cursor, 'acked')
  if acked then
    local acked_ms = tonumber(string.match(acked, '^(%d+)')) or 0
    if acked_ms < minid then
      minid = acked_ms
    end
  end
  redis.call('XADD', stream, 'MINID', '~', minid, '*',
    'type', event_type, 'effect_id', effect_id,
    'batch', f[1] or '', 'tool_call', f[2] or '', 'action', f[3] or '', 'upstream', f[4] or '',
    'method', f[5] or '', 'path', f[6] or '', 'status', f[7] or '0', 'ext', f[8] or '',
    'reason', f[9] or '', 'ts', now, 'state', f[10] or '')
  if acked then
    redis.call('PERSIST', stream)
    redis.call('PERSIST', cursor)
  else
    redis.call('PEXPIRE', stream, retention_ms)
  end
end

-- An in-flight record whose holder let its lease run out: it may have sent the request and
-- died, so the outcome is unknown and goes to review.
local function lapse(record, stream, cursor, unknown, leases, effect_id, reason, now,
    retention_ms)
  redis.call('HSET', record, 'state', 'unknown', 'updated', now, 'reason', reason)
  hold(record, unknown)
  redis.call('ZREM', leases, effect_id)
  redis.call('ZADD', unknown, now, effect_id)
  emit(record, stream, cursor, effect_id, 'effect.unknown', now, retention_ms)
end

-- Append an operator action to the agent's audit stream; the entry's time is its stream id's.
-- ``a`` holds action, actor, target, before, after, note.
local function audit(stream, a, now, retention_ms)
  redis.call('XADD', stream, 'MINID', '~', now - retention_ms, '*', 'action', a[1],
    'actor', a[2], 'target', a[3], 'before', a[4], 'after', a[5], 'note', a[6])
  redis.call('PEXPIRE', stream, retention_ms)
end
"""

# KEYS: record, outbox, unknown zset, batch set of the request's batch, leases zset, control,
#       the agent's fence counter, its delivery cursor, and (except on Redis Cluster, where it
#       lives in another slot) the store's marker.
# ARGV: effect id, fingerprint, lease ms, ttl ms, batch, tool call, action, upstream, method,
#       path, event retention ms, reason written when an expired lease is found, ignore the
#       agent's pause ('1' or '0'), take a freed key under another fingerprint ('1' or '0'),
#       the marker's epoch the proxy last saw ('' to not compare).
# Returns {1, fence} when claimed, else {0, fence, HGETALL of the record}: the caller gets the
# standing record, body included, in the same round trip, so a replay costs one. A claim that
# would take the key of a paused agent returns {2, fence, origin, reason, actor, since}: the
# pause check rides on the claim, so it costs no round trip of its own. A store whose marker is
# not the one the proxy last saw (it was emptied, or restarted without its data, since) returns
# {3} before anything is read or written: on such a store a repeat of a forgotten effect would
# look new.
CLAIM = (
    _PRELUDE
    + """
if ARGV[15] ~= '' and redis.call('HGET', KEYS[9], 'epoch') ~= ARGV[15] then
  return {3}
end
local record, stream, unknown, batch_set, leases = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
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
      lapse(record, stream, KEYS[8], unknown, leases, effect_id, ARGV[12], now, retention_ms)
    end
    return {0, fence, redis.call('HGETALL', record)}
  end
  if state ~= 'not_applied' or (cur[3] ~= fingerprint and ARGV[14] ~= '1') then
    if state == 'completed' and cur[3] == fingerprint then
      emit(record, stream, KEYS[8], effect_id, 'effect.replayed', now, retention_ms)
    end
    return {0, fence, redis.call('HGETALL', record)}
  end
  -- A freed key taken again: keep its history, drop the old outcome.
  created, attempts = tonumber(cur[5]), tonumber(cur[6])
end
if ARGV[13] ~= '1' then
  local pause = redis.call('HMGET', KEYS[6], 'paused', 'reason', 'actor', 'since')
  if pause[1] and pause[1] ~= '' then
    return {2, fence, pause[1], pause[2], pause[3], pause[4]}
  end
end
if state then
  redis.call('DEL', record)
end
fence = next_fence(KEYS[7], fence, ttl_ms)
-- Created without an expiry: the attempt is held until its outcome is written.
redis.call('HSET', record, 'state', 'in_flight', 'fence', fence, 'fp', fingerprint,
  'batch', ARGV[5], 'tool_call', ARGV[6], 'action', ARGV[7], 'upstream', ARGV[8],
  'method', ARGV[9], 'path', ARGV[10], 'lease_exp', now + lease_ms, 'created', created,
  'updated', now, 'attempts', attempts + 1, 'ext', '', 'reason', '', 'bkey', batch_set)
-- A record that expired while unknown (before unknown records were held) may have left its
-- review entry behind.
redis.call('ZREM', unknown, effect_id)
redis.call('SADD', batch_set, effect_id)
extend_expiry(batch_set, ttl_ms)
redis.call('ZADD', leases, now + lease_ms, effect_id)
redis.call('PERSIST', leases)
return {1, fence, created}
"""
)

# A failure joins the streak (and, while the agent is paused automatically, its snapshot); a
# success clears it. The failure that makes the streak long enough copies it into the snapshot
# and only then pauses the agent, with an audit entry: all in the settle's one step. The words
# of the reason are those of store/control.py. ``a`` is the SETTLE script's ARGV.
_COUNT_OUTCOME = """
local function count_outcome(control, streak, snapshot, audit_stream, entry, now, a)
  if a[15] ~= '1' then
    redis.call('DEL', streak)
    return
  end
  local retention_ms, longest = tonumber(a[18]), tonumber(a[20])
  local n = redis.call('RPUSH', streak, entry)
  if n > longest then
    redis.call('LTRIM', streak, -longest, -1)
    n = longest
  end
  redis.call('PEXPIRE', streak, retention_ms)
  local paused = redis.call('HGET', control, 'paused')
  if paused == 'auto' then
    redis.call('RPUSH', snapshot, entry)
    redis.call('PEXPIRE', snapshot, retention_ms)
    redis.call('HINCRBY', control, 'v', 1)
    redis.call('PEXPIRE', control, retention_ms)
  elseif (not paused or paused == '') and n >= tonumber(a[14]) then
    redis.call('DEL', snapshot)
    redis.call('RPUSH', snapshot, unpack(redis.call('LRANGE', streak, 0, -1)))
    redis.call('PEXPIRE', snapshot, retention_ms)
    local reason = 'auto-paused after ' .. n .. ' consecutive failures. Last error: ' .. a[16]
    redis.call('HSET', control, 'paused', 'auto', 'reason', reason, 'actor', 'idemproxy',
      'since', now)
    redis.call('HINCRBY', control, 'v', 1)
    redis.call('PEXPIRE', control, retention_ms)
    audit(audit_stream, {'agent.auto_pause', 'idemproxy', a[17], 'running', 'paused', reason},
      now, tonumber(a[19]))
  end
end
"""

# KEYS: record, outbox, unknown zset, leases zset, then the agent's control, streak, snapshot,
#       audit stream and delivery cursor.
# ARGV: effect id, fence, new state, event type, ttl ms, event retention ms, external id,
#       reason, has response ('1' or '0'), status, headers, body, body truncated ('1' or '0'),
#       then the failure count (store/control.py): pause after this many failures (0: do not
#       count), failure ('1' or '0'), the error, agent, control and audit retention ms, the
#       longest streak kept.
# Returns 1 when written, 0 when the caller no longer holds the fence.
SETTLE = (
    _PRELUDE
    + _COUNT_OUTCOME
    + """
local record, stream, unknown = KEYS[1], KEYS[2], KEYS[3]
local effect_id, state = ARGV[1], ARGV[3]
local ttl_ms, retention_ms = tonumber(ARGV[5]), tonumber(ARGV[6])
local cur = redis.call('HMGET', record, 'state', 'fence', 'bkey')
if cur[1] ~= 'in_flight' or tonumber(cur[2]) ~= tonumber(ARGV[2]) then
  return 0
end
redis.call('ZREM', KEYS[4], effect_id)
local now = now_ms()
redis.call('HSET', record, 'state', state, 'updated', now, 'ext', ARGV[7], 'reason', ARGV[8])
if ARGV[9] == '1' then
  redis.call('HSET', record, 'status', ARGV[10], 'headers', ARGV[11], 'body', ARGV[12],
    'trunc', ARGV[13])
else
  redis.call('HDEL', record, 'status', 'headers', 'body', 'trunc')
end
if state == 'unknown' then
  hold(record, unknown)
  redis.call('ZADD', unknown, now, effect_id)
else
  redis.call('PEXPIRE', record, ttl_ms)
end
-- The batch set's name is read from the record because settle is not told the batch. It
-- carries the same hash tag as KEYS[1], so it lives in the same slot even on Redis Cluster.
if cur[3] then
  extend_expiry(cur[3], ttl_ms)
end
emit(record, stream, KEYS[9], effect_id, ARGV[4], now, retention_ms)
if tonumber(ARGV[14]) > 0 then
  count_outcome(KEYS[5], KEYS[6], KEYS[7], KEYS[8], ARGV[2] .. ' ' .. effect_id, now, ARGV)
end
return 1
"""
)

# KEYS: record, outbox, unknown zset, leases zset, audit stream, the agent's fence counter, its
#       delivery cursor.
# ARGV: effect id, expected state, new state, ttl ms, event retention ms, external id, reason,
#       has response ('1' or '0'), status, headers, body, body truncated ('1' or '0'),
#       has audit entry ('1' or '0'), audit retention ms, then the entry's action, actor,
#       target, before, after, note, and the expected fence ('' for any).
# Returns {1, HGETALL after} when resolved, {0, HGETALL as it stands} when refused ({} if none).
RESOLVE = (
    _PRELUDE
    + """
local record, stream, unknown = KEYS[1], KEYS[2], KEYS[3]
local effect_id, state = ARGV[1], ARGV[3]
local ttl_ms, retention_ms = tonumber(ARGV[4]), tonumber(ARGV[5])
local cur = redis.call('HMGET', record, 'state', 'fence', 'bkey')
if cur[1] ~= ARGV[2] or (ARGV[21] ~= '' and tonumber(cur[2]) ~= tonumber(ARGV[21])) then
  return {0, redis.call('HGETALL', record)}
end
local now = now_ms()
-- A higher fence drops the late settle of an attempt that still thinks it holds the key.
local fence = next_fence(KEYS[6], tonumber(cur[2]), ttl_ms)
redis.call('HSET', record, 'state', state, 'fence', fence, 'lease_exp', 0,
  'updated', now, 'ext', ARGV[6], 'reason', ARGV[7])
if ARGV[8] == '1' then
  redis.call('HSET', record, 'status', ARGV[9], 'headers', ARGV[10], 'body', ARGV[11],
    'trunc', ARGV[12])
else
  redis.call('HDEL', record, 'status', 'headers', 'body', 'trunc')
end
redis.call('PEXPIRE', record, ttl_ms)
redis.call('ZREM', unknown, effect_id)
redis.call('ZREM', KEYS[4], effect_id)
if cur[3] then
  extend_expiry(cur[3], ttl_ms)
end
emit(record, stream, KEYS[7], effect_id, 'effect.resolved', now, retention_ms)
if ARGV[13] == '1' then
  audit(KEYS[5], {ARGV[15], ARGV[16], ARGV[17], ARGV[18], ARGV[19], ARGV[20]}, now,
    tonumber(ARGV[14]))
end
return {1, redis.call('HGETALL', record)}
"""
)

# KEYS: record, leases zset. ARGV: fence, lease ms, effect id.
# Returns 1 when extended, 0 when not held.
RENEW = """
local cur = redis.call('HMGET', KEYS[1], 'state', 'fence')
if cur[1] ~= 'in_flight' or tonumber(cur[2]) ~= tonumber(ARGV[1]) then
  return 0
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('HSET', KEYS[1], 'lease_exp', now + tonumber(ARGV[2]))
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[2]), ARGV[3])
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

# KEYS: leases zset, outbox, unknown zset, delivery cursor, then the records of the candidate
#       effect ids.
# ARGV: event retention ms, reason, then the effect ids aligned with KEYS[5..].
# Turns each candidate still in flight with a lapsed lease unknown; drops stale lease entries.
# Returns {effect id, HGETALL} of each record turned unknown.
SWEEP = (
    _PRELUDE
    + """
local leases, stream, unknown = KEYS[1], KEYS[2], KEYS[3]
local retention_ms = tonumber(ARGV[1])
local now = now_ms()
local lapsed = {}
for i = 5, #KEYS do
  local effect_id = ARGV[i - 2]
  local cur = redis.call('HMGET', KEYS[i], 'state', 'lease_exp')
  if cur[1] ~= 'in_flight' then
    redis.call('ZREM', leases, effect_id)
  elseif tonumber(cur[2]) <= now then
    lapse(KEYS[i], stream, KEYS[4], unknown, leases, effect_id, ARGV[2], now, retention_ms)
    lapsed[#lapsed + 1] = {effect_id, redis.call('HGETALL', KEYS[i])}
  end
end
return lapsed
"""
)

# KEYS: cursor hash, audit stream, outbox. ARGV: expected version, cursor retention ms, has
# audit entry ('1' or '0'), audit retention ms, the entry's six fields, then the cursor's fields
# as name, value pairs. Returns 1 when written, 0 when the stored version differs.
# While events wait after ``acked`` the cursor and the outbox are kept without expiry (see
# emit); once the controller has accepted the last event both expire as usual again.
WRITE_CURSOR = (
    _PRELUDE
    + """
local version = tonumber(redis.call('HGET', KEYS[1], 'v') or '0')
if version ~= tonumber(ARGV[1]) then
  return 0
end
redis.call('HSET', KEYS[1], 'v', version + 1)
for i = 11, #ARGV, 2 do
  redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
end
local last = redis.call('XREVRANGE', KEYS[3], '+', '-', 'COUNT', 1)
if #last == 0 or last[1][1] == redis.call('HGET', KEYS[1], 'acked') then
  redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]))
  if #last > 0 then
    redis.call('PEXPIRE', KEYS[3], tonumber(ARGV[2]))
  end
else
  redis.call('PERSIST', KEYS[1])
  redis.call('PERSIST', KEYS[3])
end
if ARGV[3] == '1' then
  audit(KEYS[2], {ARGV[5], ARGV[6], ARGV[7], ARGV[8], ARGV[9], ARGV[10]}, now_ms(),
    tonumber(ARGV[4]))
end
return 1
"""
)

# KEYS: batch set, archive key, audit stream, then the records to free.
# ARGV: has archive ('1' or '0'), archive, archive retention ms, audit retention ms, the audit
#       entry's six fields, then effect id and fence pairs aligned with KEYS[4..].
# Deletes each listed record still not_applied at its fence; returns the effect ids deleted.
CLEAR_BATCH = (
    _PRELUDE
    + """
local batch_set = KEYS[1]
local cleared = {}
for i = 4, #KEYS do
  local effect_id, fence = ARGV[11 + 2 * (i - 4)], ARGV[12 + 2 * (i - 4)]
  local cur = redis.call('HMGET', KEYS[i], 'state', 'fence', 'bkey')
  if cur[1] == 'not_applied' and cur[2] == fence and cur[3] == batch_set then
    redis.call('DEL', KEYS[i])
    redis.call('SREM', batch_set, effect_id)
    cleared[#cleared + 1] = effect_id
  end
end
if ARGV[1] == '1' then
  redis.call('SET', KEYS[2], ARGV[2], 'PX', tonumber(ARGV[3]))
end
audit(KEYS[3], {ARGV[5], ARGV[6], ARGV[7], ARGV[8], ARGV[9], ARGV[10]}, now_ms(),
  tonumber(ARGV[4]))
return cleared
"""
)

# KEYS: outbox. ARGV: XRANGE start ('-' or '(<id>'), cap. Counts in pages, inside Redis, so
# only the number crosses the wire.
COUNT_EVENTS = """
local n, start, cap = 0, ARGV[1], tonumber(ARGV[2])
while n < cap do
  local page = redis.call('XRANGE', KEYS[1], start, '+', 'COUNT', math.min(1000, cap - n))
  if #page == 0 then
    break
  end
  n = n + #page
  start = '(' .. page[#page][1]
end
return n
"""

_REPLY = """
local function control_reply(control, streak, snapshot)
  return {redis.call('HGETALL', control), redis.call('LRANGE', streak, 0, -1),
    redis.call('LRANGE', snapshot, 0, -1)}
end
"""

# The agent controls of store/control.py.
# KEYS: control, streak, snapshot. Returns the three of them in one reply.
READ_CONTROL = _REPLY + "return control_reply(KEYS[1], KEYS[2], KEYS[3])"

# KEYS: control, streak, snapshot, audit stream.
# ARGV: expected version, set a pause ('1') or clear it ('0'), origin, reason, actor, reset
#       the streak and snapshot ('1' or '0'), control retention ms, then the audit entry as
#       ``audit_args`` gives it (flag, retention ms, six fields).
# Returns {0} when the version differs, else {1, control as READ_CONTROL returns it}.
WRITE_PAUSE = (
    _PRELUDE
    + _REPLY
    + """
local control, streak, snapshot = KEYS[1], KEYS[2], KEYS[3]
local version = tonumber(redis.call('HGET', control, 'v') or '0')
if version ~= tonumber(ARGV[1]) then
  return {0}
end
local now = now_ms()
if ARGV[2] == '1' then
  redis.call('HSET', control, 'paused', ARGV[3], 'reason', ARGV[4], 'actor', ARGV[5],
    'since', now)
else
  redis.call('HSET', control, 'paused', '', 'reason', '', 'actor', '', 'since', 0)
end
redis.call('HSET', control, 'v', version + 1)
redis.call('PEXPIRE', control, tonumber(ARGV[7]))
if ARGV[6] == '1' then
  redis.call('DEL', streak, snapshot)
end
audit(KEYS[4], {ARGV[10], ARGV[11], ARGV[12], ARGV[13], ARGV[14], ARGV[15]}, now,
  tonumber(ARGV[9]))
return {1, control_reply(control, streak, snapshot)}
"""
)
