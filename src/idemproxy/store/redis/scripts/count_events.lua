-- Counts the outbox's events from ``start`` ('-' or '(<id>'), at most ``cap``, in pages, inside
-- Redis, so only the number crosses the wire.
local stream = KEYS[1]
local start = ARGV[1]
local cap = tonumber(ARGV[2])

local n = 0
while n < cap do
  local page = redis.call('XRANGE', stream, start, '+', 'COUNT', math.min(1000, cap - n))
  if #page == 0 then
    break
  end
  n = n + #page
  start = '(' .. page[#page][1]
end
return n
