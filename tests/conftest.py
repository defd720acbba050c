"""Settings for the whole suite."""

from __future__ import annotations

from hypothesis import settings

# Test machines are shared and noisy: a per-example time limit would fail tests on load, not on
# behaviour, so hypothesis runs without one (as every other test does: no timed assertions).
settings.register_profile("idemproxy", deadline=None)
settings.load_profile("idemproxy")
