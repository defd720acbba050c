"""Lua scripts of the Redis store's agent registry and worklists (:mod:`.agents`).

Each runs on keys of one slot: the worklists (tag ``{:agents}``), the registry, or one agent's
keys. Worklist scores are Redis's own milliseconds, so every proxy agrees on how long ago an
agent was listed. Key names are those of :mod:`idemproxy.store.redis.keys`.
"""

from __future__ import annotations

_NOW = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
"""

# KEYS: the review and delivery worklists. ARGV: the agents.
# Lists each agent on both as of now.
LIST = (
    _NOW
    + """
for i = 1, #ARGV do
  redis.call('ZADD', KEYS[1], now, ARGV[i])
  redis.call('ZADD', KEYS[2], now, ARGV[i])
end
return #ARGV
"""
)

# KEYS: the review and delivery worklists. ARGV: listing grace ms, how many of each to return.
# Returns {before, review agents, delivery agents}: those listed at ``before`` (now minus the
# grace) or earlier, oldest first.
STALE = (
    _NOW
    + """
local before = now - tonumber(ARGV[1])
local n = tonumber(ARGV[2])
return {before, redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', before, 'LIMIT', 0, n),
  redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', before, 'LIMIT', 0, n)}
"""
)

# KEYS: the review and delivery worklists. ARGV: ``before`` as STALE returned it, then triples
# of agent, worklist (1 or 2) and whether the agent still has that work ('1' or '0').
# An agent listed again since STALE is left alone: it is scored above ``before`` (by the grace,
# at least a millisecond). One without work
# is dropped; one with work is scored now, so it is checked again a grace later: a higher
# score only ever delays a drop. Returns how many were dropped.
FORGET = (
    _NOW
    + """
local before, dropped = tonumber(ARGV[1]), 0
for i = 2, #ARGV, 3 do
  local key, agent = KEYS[tonumber(ARGV[i + 1])], ARGV[i]
  local score = redis.call('ZSCORE', key, agent)
  if score and tonumber(score) <= before then
    if ARGV[i + 2] == '1' then
      redis.call('ZADD', key, 'XX', now, agent)
    else
      redis.call('ZREM', key, agent)
      dropped = dropped + 1
    end
  end
end
return dropped
"""
)

# KEYS: the agent's leases zset, review zset, control, delivery cursor and outbox.
# Returns {review, delivery}, each 1 if the agent has that work (store/work.py), else 0. An
# index entry whose record expired still counts until the sweep drops it, as every pass does.
WORK = """
local records = redis.call('ZCARD', KEYS[1]) > 0 or redis.call('ZCARD', KEYS[2]) > 0
local paused = redis.call('HGET', KEYS[3], 'paused')
local acked = redis.call('HGET', KEYS[4], 'acked')
local start = '-'
if acked and acked ~= '' then
  start = '(' .. acked
end
local waiting = #redis.call('XRANGE', KEYS[5], start, '+', 'COUNT', 1) > 0
local review = records or (paused and paused ~= '')
return {review and 1 or 0, (records or waiting) and 1 or 0}
"""

# KEYS: the registry. ARGV: drop agents seen at or before this ms, the cap.
# Past the cap, the least recently seen go. Returns how many the cap dropped.
TRIM_REGISTRY = """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
local over = redis.call('ZCARD', KEYS[1]) - tonumber(ARGV[2])
if over <= 0 then
  return 0
end
redis.call('ZREMRANGEBYRANK', KEYS[1], 0, over - 1)
return over
"""
