-- Writes the outcome of a check only if the marker and the loss are still as read.
-- Returns 1 when written, 0 when the marker or the loss changed since they were read.
local marker = KEYS[1]
local loss = KEYS[2]
local log = KEYS[3]
local read_epoch = ARGV[1]  -- the marker's epoch and checks as read ('' for none)
local read_checks = ARGV[2]
local read_loss_id = ARGV[3]  -- '' for none
local write_marker = ARGV[4]
local marker_epoch = ARGV[5]
local marker_created_ms = ARGV[6]
local marker_checks = ARGV[7]
local marker_replaces = ARGV[8]
local loss_action = ARGV[9]  -- '1' writes the loss, '2' deletes it, '0' neither
local loss_id = ARGV[10]
local loss_detected_ms = ARGV[11]
local loss_kind = ARGV[12]
local loss_epochs = ARGV[13]
local loss_detail = ARGV[14]
local write_log = ARGV[15]
local log_action = ARGV[16]
local log_actor = ARGV[17]
local log_target = ARGV[18]
local log_before = ARGV[19]
local log_after = ARGV[20]
local log_note = ARGV[21]
local log_limit = ARGV[22]

local m = redis.call('HMGET', marker, '{{marker.epoch}}', '{{marker.checks}}')
local l = redis.call('HGET', loss, '{{loss.id}}')
if (m[1] or '') ~= read_epoch or (m[2] or '') ~= read_checks or (l or '') ~= read_loss_id then
  return 0
end
if write_marker == '1' then
  redis.call('HSET', marker, '{{marker.epoch}}', marker_epoch,
    '{{marker.created_ms}}', marker_created_ms, '{{marker.checks}}', marker_checks,
    '{{marker.replaces}}', marker_replaces)
end
if loss_action == '1' then
  redis.call('HSET', loss, '{{loss.id}}', loss_id, '{{loss.detected_ms}}', loss_detected_ms,
    '{{loss.kind}}', loss_kind, '{{loss.epochs}}', loss_epochs, '{{loss.detail}}', loss_detail)
elseif loss_action == '2' then
  redis.call('DEL', loss)
end
if write_log == '1' then
  redis.call('XADD', log, 'MAXLEN', '~', log_limit, '*', '{{audit.action}}', log_action,
    '{{audit.actor}}', log_actor, '{{audit.target}}', log_target,
    '{{audit.before}}', log_before, '{{audit.after}}', log_after, '{{audit.note}}', log_note)
end
return 1
