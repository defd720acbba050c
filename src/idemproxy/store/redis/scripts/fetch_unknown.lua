-- The records the review zset lists, in one round trip. Entries go stale when a record expires
-- (or is freed and claimed again); the script drops those in the same step, so a record
-- re-created meanwhile keeps its entry.
-- KEYS: the review zset, then the records of ``effect_ids``, aligned.
-- Returns one HGETALL per id, empty for a stale entry.
local index = KEYS[1]
local effect_ids = argv_from(1)

local out = {}
for i = 2, #KEYS do
  if redis.call('HGET', KEYS[i], '{{record.state}}') == 'unknown' then
    out[i - 1] = redis.call('HGETALL', KEYS[i])
  else
    redis.call('ZREM', index, effect_ids[i - 1])
    out[i - 1] = {}
  end
end
return out
