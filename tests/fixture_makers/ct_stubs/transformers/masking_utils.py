"""Stand-in (see transformers/__init__.py)."""
ALL_MASK_ATTENTION_FUNCTIONS = {}
