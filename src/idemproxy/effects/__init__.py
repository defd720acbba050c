"""The exactly-once feature: claim, forward once, settle, replay (see flow.py)."""
