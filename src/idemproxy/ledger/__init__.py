"""The effect ledger: delivery to the recovery controller, batch progress, review and recovery."""
