"""Stand-in (see safetensors/__init__.py)."""


def save_file(*a, **k):
    raise RuntimeError("safetensors stub: save_file is not available")


def load_file(*a, **k):
    raise RuntimeError("safetensors stub: load_file is not available")
