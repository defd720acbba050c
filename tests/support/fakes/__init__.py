"""Fake upstream services that behave like the real APIs where exactly-once depends on it."""
