-- The agent's control (store/control.py), as control_reply gives it.
local control = KEYS[1]
local streak = KEYS[2]
local snapshot = KEYS[3]

return control_reply(control, streak, snapshot)
