"""Packages the reader uses when they are installed and does without otherwise (xxhash,
zstandard, ml_dtypes)."""

from __future__ import annotations

_LOADED: dict = {}


def optional(module: str):
    """The module if it can be imported, else None (tried once: every checksum asks)."""
    if module not in _LOADED:
        try:
            _LOADED[module] = __import__(module)
        except ImportError:
            _LOADED[module] = None
    return _LOADED[module]
