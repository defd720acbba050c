"""The Redis backend of the store: single node, Sentinel and Cluster (:mod:`.store`)."""
