"""Stand-in (see transformers/__init__.py)."""
CONFIG_NAME = "config.json"
