-- Drops the agents stale found without work. An agent listed again since stale is left alone:
-- it is scored above ``before`` (by the grace, at least a millisecond). One without work is
-- dropped; one with work is scored now, so it is checked again a grace later: a higher score
-- only ever delays a drop.
-- Returns how many were dropped.
local before = tonumber(ARGV[1])  -- as stale returned it
local entries = argv_from(2)  -- agent, worklist (its index in KEYS), has work ('1', '0')

local now = now_ms()
local dropped = 0
for i = 1, #entries, 3 do
  local agent, key = entries[i], KEYS[tonumber(entries[i + 1])]
  local score = redis.call('ZSCORE', key, agent)
  if score and tonumber(score) <= before then
    if entries[i + 2] == '1' then
      redis.call('ZADD', key, 'XX', now, agent)
    else
      redis.call('ZREM', key, agent)
      dropped = dropped + 1
    end
  end
end
return dropped
