"""Durable effect records: the Store protocol and its backends."""
