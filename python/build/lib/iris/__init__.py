"""iris: read .iris model archives from Python.

    import iris
    a = iris.open("model.iris")
    a.tensors["model.layers.0.mlp.down_proj.weight"].dequantize("bfloat16")

See python/README.md; the archive format is formats/FORMAT.md."""

from ._archive import Archive, Files, Tensor, open  # noqa: A004
from ._errors import CorruptError, IrisError

__version__ = "0.3.0"
__all__ = ["Archive", "CorruptError", "Files", "IrisError", "Tensor", "native_library", "open"]


def native_library() -> str:
    """The path of the libiris this package uses for dequantization, or why none was loaded."""
    from . import _native

    lib = _native.library()
    return _native.why_not() if lib is not None else f"none ({_native.why_not()})"
