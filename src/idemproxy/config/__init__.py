"""Configuration: the settings, how their layers are read, and what is said about bad ones."""
