"""Stand-in (see transformers/__init__.py)."""
ALL_ATTENTION_FUNCTIONS = {}
