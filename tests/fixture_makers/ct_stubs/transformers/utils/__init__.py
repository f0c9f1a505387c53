"""Stand-in (see transformers/__init__.py)."""
CONFIG_NAME = "config.json"
SAFE_WEIGHTS_NAME = "model.safetensors"
SAFE_WEIGHTS_INDEX_NAME = "model.safetensors.index.json"


def cached_file(*a, **k):
    raise RuntimeError("transformers stub: cached_file is not available")
