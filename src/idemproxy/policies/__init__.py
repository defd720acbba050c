"""Routes, policies and upstream adapters."""
