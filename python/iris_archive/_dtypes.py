"""The output dtypes the reader speaks: what a dtype argument may be, and which numpy dtype a
BF16 result comes back as.

numpy has no bfloat16. ml_dtypes (the package jax and tensorflow use) adds one; when it is
installed, BF16 results are arrays of ml_dtypes.bfloat16 (a zero-cost view of the same bits,
so `x.astype(np.float32)` gives the values), else of uint16 holding the bits, as before."""

from __future__ import annotations

import numpy as np

from ._errors import IrisError
from ._optional import optional

# The outputs dequantization makes, by the names the API takes and the archive's names for them.
OUTPUTS = ("float32", "float16", "bfloat16")
ARCHIVE_NAME = {"float32": "f32", "float16": "f16", "bfloat16": "bf16"}
_FROM_ARCHIVE = {v: k for k, v in ARCHIVE_NAME.items()}


def bfloat16() -> np.dtype:
    """The numpy dtype of BF16 results: ml_dtypes.bfloat16 when ml_dtypes is installed, else
    uint16 (the bits)."""
    ml = optional("ml_dtypes")
    return np.dtype(ml.bfloat16) if ml is not None else np.dtype(np.uint16)


def as_bf16(bits: np.ndarray) -> np.ndarray:
    """BF16 bits (uint16) as the dtype bfloat16() names: a view, no copy."""
    dt = bfloat16()
    return bits if dt == bits.dtype else bits.view(dt)


def output_name(dtype, what: str) -> str:
    """A dtype argument as "float32", "float16" or "bfloat16". Takes those strings and
    anything numpy reads as float32 or float16 (np.float32, np.dtype("float16"), "f4"), and
    ml_dtypes.bfloat16 (its type or dtype). uint16 is refused: it would say nothing of the
    values. IrisError naming `what` (the tensor) otherwise."""
    if isinstance(dtype, str) and dtype in OUTPUTS:
        return dtype
    try:
        dt = np.dtype(dtype)
    except TypeError:  # not a dtype at all (np.dtype(None) is float64, refused below)
        dt = None
    if dtype is not None and dt is not None:
        if dt == np.float32 or dt == np.float16:
            return dt.name
        if dt.name == "bfloat16":  # ml_dtypes' (np.dtype() knows the type once ml_dtypes is imported)
            return "bfloat16"
    raise IrisError(f"{what}dtype must be float32, float16 or bfloat16 (a name, a numpy dtype or ml_dtypes.bfloat16), "
                    f"not {dtype!r}")


def logical(archive_dtype: str) -> str:
    """What get_tensor gives a quantized tensor recorded as `archive_dtype`: the same float
    type (the converter records the source's: bf16, f16 or f32), float32 for anything else."""
    return _FROM_ARCHIVE.get(archive_dtype, "float32")
