"""Stand-in for safetensors: compressed-tensors imports safe_open/save_file for its own checkpoint
loading and offloading, which the fixture maker does not use (it reads and writes safetensors
files itself)."""


def safe_open(*a, **k):
    raise RuntimeError("safetensors stub: safe_open is not available")
