-- Returns {review, delivery, approval}, each 1 if the agent has that work (store/work.py),
-- else 0. An index entry whose record expired still counts until the sweep drops it, as every
-- pass does.
local leases = KEYS[1]
local unknown = KEYS[2]
local control = KEYS[3]
local cursor = KEYS[4]
local stream = KEYS[5]
local approvals = KEYS[6]

local records = redis.call('ZCARD', leases) > 0 or redis.call('ZCARD', unknown) > 0
local paused = redis.call('HGET', control, '{{control.paused}}')
local acked = redis.call('HGET', cursor, '{{cursor.acked}}')
local start = '-'
if acked and acked ~= '' then
  start = '(' .. acked
end
local waiting = #redis.call('XRANGE', stream, start, '+', 'COUNT', 1) > 0
local review = records or (paused and paused ~= '')
local asked = redis.call('ZCARD', approvals) > 0
return {review and 1 or 0, (records or waiting) and 1 or 0, asked and 1 or 0}
