"""Archive.get_slice: a tensor read in parts, as tensor-parallel loaders read their shard of a
weight (safetensors' get_slice). Indexing the first dimension reads only those rows: an
unquantized tensor is indexed as a view of the mapping; a quantized one dequantizes the rows
of the leading indices asked for (for tiled codes, only the stripes of tile_n rows holding
them) and numpy takes the rest of the index from those."""

from __future__ import annotations

import math
import operator

import numpy as np

from . import _decode, _dtypes
from ._jsontext import shown


class TensorSlice:
    """A tensor's shape and dtype, and its values by index: sl[a:b], sl[a:b, c:d], sl[i],
    sl[..., c:d]. Integers and slices (any nonzero step) only. Unlike numpy, which clips, a
    bound outside [-size, size] of its dimension raises IndexError, as in safetensors: a shard
    computed wrong should not come back short."""

    __slots__ = ("_t",)

    def __init__(self, tensor):
        self._t = tensor

    @property
    def shape(self) -> tuple:
        return tuple(self._t.shape)

    def get_shape(self) -> list:
        """The shape as a list, as safetensors' slice gives it."""
        return list(self._t.shape)

    @property
    def ndim(self) -> int:
        return len(self._t.shape)

    @property
    def dtype(self) -> np.dtype:
        """The numpy dtype indexing returns (what get_tensor gives the tensor)."""
        t = self._t
        if t.quantized:
            out = _dtypes.logical(t.dtype)
            return _dtypes.bfloat16() if out == "bfloat16" else np.dtype(out)
        return t.numpy().dtype

    def get_dtype(self) -> str:
        """The archive's name of the tensor's element type ("bf16", "f32", ...; for a quantized
        tensor the float type it dequantizes to), as safetensors' get_dtype names its own."""
        return self._t.dtype

    def __len__(self) -> int:
        if not self._t.shape:
            raise TypeError("len() of a 0-d tensor")
        return self._t.shape[0]

    def __getitem__(self, key) -> np.ndarray:
        t = self._t
        items = _normalize(self._where(), t.shape, key)
        if not t.quantized:
            return t.numpy()[tuple(map(_as_index, items))]  # a view: only the pages indexed are read
        shape = tuple(t.shape)
        if len(shape) >= 2 and items:
            # Leading index i covers rows [i * per, (i + 1) * per) of the [rows, K] view.
            lead, per = items[0], math.prod(shape[1:-1])
            if isinstance(lead, int):
                lo, hi, first = lead, lead + 1, 0
            elif len(lead):
                lo, hi = min(lead), max(lead) + 1
                first = _as_index(range(lead.start - lo, lead.stop - lo, lead.step))
            else:
                lo, hi, first = 0, 0, slice(0, 0)
            block = self._rows(lo * per, hi * per).reshape((hi - lo,) + shape[1:])
            return block[(first,) + tuple(map(_as_index, items[1:]))]
        # A vector (one row: its first dimension is K) or a scalar: decoded whole.
        return self._rows(0, _decode.rows_of(t)[0]).reshape(shape)[tuple(map(_as_index, items))]

    def _rows(self, start: int, stop: int) -> np.ndarray:
        return self._t.dequantize_rows(start, stop, _dtypes.logical(self._t.dtype))

    def _where(self) -> str:
        return f"{self._t._archive.path}: tensor '{shown(self._t.name)}': "

    def __repr__(self) -> str:
        return f"TensorSlice({self._t.name!r}, shape={self.shape}, dtype={self.get_dtype()!r})"


def _int(where: str, x) -> int:
    """An index that is an integer (Python's or numpy's; not a bool, which numpy reads as a mask)."""
    if isinstance(x, (bool, np.bool_)):
        raise TypeError(f"{where}indices must be integers or slices, not {type(x).__name__}")
    try:
        return operator.index(x)
    except TypeError:
        raise TypeError(f"{where}indices must be integers, slices or ..., not {type(x).__name__}") from None


def _normalize(where: str, shape, key) -> list:
    """`key` as one entry per dimension it indexes (at most len(shape)): an int in [0, size)
    or a range, the ellipsis expanded. Raises IndexError for an index or bound out of range
    or too many indices, TypeError for what is no integer or slice, ValueError for step 0."""
    items = key if isinstance(key, tuple) else (key,)
    ellipses = [i for i, x in enumerate(items) if x is Ellipsis]
    if len(ellipses) > 1:
        raise IndexError(f"{where}an index can only have a single ellipsis ('...')")
    if ellipses:
        i = ellipses[0]
        items = items[:i] + (slice(None),) * max(0, len(shape) - len(items) + 1) + items[i + 1 :]
    if len(items) > len(shape):
        raise IndexError(f"{where}{len(items)} indices for a tensor of {len(shape)} dimensions {list(shape)}")
    out = []
    for dim, (x, size) in enumerate(zip(items, shape)):
        if isinstance(x, slice):
            start, stop, step = (None if v is None else _int(where, v) for v in (x.start, x.stop, x.step))
            for bound in (start, stop):
                if bound is not None and not -size <= bound <= size:
                    raise IndexError(f"{where}slice bound {bound} is outside dimension {dim} of size {size}")
            if step == 0:
                raise ValueError(f"{where}slice step cannot be zero")
            out.append(range(*slice(start, stop, step).indices(size)))
        else:
            i = _int(where, x)
            if not -size <= i < size:
                raise IndexError(f"{where}index {i} is out of range for dimension {dim} of size {size}")
            out.append(i % size)
    return out


def _as_index(x):
    """A normalized entry as numpy takes it: an int, or the slice of a range (a stop before 0,
    which a descending range to the first element has, is None: -1 would mean the last)."""
    if isinstance(x, int):
        return x
    return slice(x.start, x.stop if x.stop >= 0 else None, x.step)
