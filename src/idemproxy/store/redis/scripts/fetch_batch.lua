-- The records a batch set lists, as fetch_unknown does for the review zset: an entry whose
-- record is gone, or was claimed again under another batch, is dropped.
-- KEYS: the batch set, then the records of ``effect_ids``, aligned.
-- Returns one HGETALL per id, empty for a stale entry.
local batch_set = KEYS[1]
local effect_ids = argv_from(1)

local out = {}
for i = 2, #KEYS do
  if redis.call('HGET', KEYS[i], '{{record.batch_key}}') == batch_set then
    out[i - 1] = redis.call('HGETALL', KEYS[i])
  else
    redis.call('SREM', batch_set, effect_ids[i - 1])
    out[i - 1] = {}
  end
end
return out
