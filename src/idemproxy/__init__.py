"""idemproxy: an exactly-once sidecar proxy for agents that act on external APIs."""

__version__ = "0.1.0"
