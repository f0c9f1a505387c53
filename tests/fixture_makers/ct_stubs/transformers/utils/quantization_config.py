"""Stand-in (see transformers/__init__.py)."""
from transformers import CompressedTensorsConfig  # noqa: F401
