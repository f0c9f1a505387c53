"""iris: read .iris model archives from Python.

    import iris_archive as iris
    with iris.open("model.iris") as a:
        a.keys()                                               # tensor names, archive order
        a.get_tensor("model.norm.weight")                       # numpy, its values
        a.get_slice("model.layers.0.mlp.down_proj.weight")[0:512]  # only those rows are read
        a.tensors["model.layers.0.mlp.down_proj.weight"].dequantize("bfloat16")

`python -m iris_archive model.iris` (or iris-dump) lists what an archive holds. See python/README.md;
the archive format is formats/FORMAT.md."""

from ._archive import Archive, Files, Tensor, open, open_rank  # noqa: A004
from ._dtypes import bfloat16
from ._errors import ArchiveNotFoundError, ArchiveOpenError, ArchivePermissionError, CorruptError, IrisError
from ._slice import TensorSlice

__version__ = "0.3.0"
__all__ = ["Archive", "ArchiveNotFoundError", "ArchiveOpenError", "ArchivePermissionError", "CorruptError", "Files",
           "IrisError", "Tensor", "TensorSlice", "bfloat16", "native_library", "open", "open_rank"]


def native_library() -> str:
    """The path of the libiris this package uses for dequantization, or why none was loaded."""
    from . import _native

    lib = _native.library()
    return _native.why_not() if lib is not None else f"none ({_native.why_not()})"
