"""The operator console on the admin listener: pages and forms over the ledger. app.py mounts
it and serves static/, guards.py and session.py keep it to signed-in operators, pages.py and
actions.py are what they read and do, and views.py renders templates/."""
