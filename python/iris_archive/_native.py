"""libiris through ctypes (include/iris/iris.h): the fast dequantization path. Loaded from
$IRIS_LIBRARY, from next to this package, or from the system's library path; nothing is
compiled at install time."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import weakref

import numpy as np

from ._errors import CorruptError, IrisError

ABI_VERSION = 1
_DTYPES = {"float32": (11, np.float32), "float16": (9, np.float16), "bfloat16": (10, np.uint16)}
_OK, _CORRUPT = 0, 3

_lib = None
_why = "not looked for yet"
_tried = False


def _candidates():
    env = os.environ.get("IRIS_LIBRARY")
    if env:
        yield env
        return  # an explicit choice is not second-guessed
    here = os.path.dirname(os.path.abspath(__file__))
    for name in ("libiris.so.1", "libiris.so"):
        yield os.path.join(here, name)
    found = ctypes.util.find_library("iris")
    if found:
        yield found
    yield "libiris.so.1"


def _load():
    global _lib, _why, _tried
    _tried = True
    errors = []
    for path in _candidates():
        if os.path.sep in path and not os.path.exists(path):
            errors.append(f"{path}: no such file")
            continue
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            errors.append(str(e))
            continue
        lib.iris_abi_version.restype = ctypes.c_uint32
        if lib.iris_abi_version() != ABI_VERSION:
            errors.append(f"{path}: ABI {lib.iris_abi_version()}, this package speaks {ABI_VERSION}")
            continue
        _declare(lib)
        _lib, _why = lib, path
        return
    _why = "; ".join(errors) or "no candidate"


def _declare(lib):
    c_size = ctypes.c_size_t
    lib.iris_archive_open.argtypes = [ctypes.c_char_p, ctypes.c_uint32, ctypes.POINTER(ctypes.c_void_p), ctypes.c_char_p, c_size]
    lib.iris_archive_open.restype = ctypes.c_int
    lib.iris_archive_close.argtypes = [ctypes.c_void_p]
    lib.iris_archive_close.restype = None
    lib.iris_archive_find_tensor.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_uint64), ctypes.c_char_p, c_size]
    lib.iris_archive_find_tensor.restype = ctypes.c_int
    lib.iris_dequantize.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_int, ctypes.c_void_p, c_size, ctypes.c_int,
                                    ctypes.c_char_p, c_size]
    lib.iris_dequantize.restype = ctypes.c_int
    lib.iris_dequantize_rows.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_int,
                                         ctypes.c_void_p, c_size, ctypes.c_int, ctypes.c_char_p, c_size]
    lib.iris_dequantize_rows.restype = ctypes.c_int
    lib.iris_archive_verify.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p, c_size]
    lib.iris_archive_verify.restype = ctypes.c_int
    lib.iris_version_string.restype = ctypes.c_char_p
    lib.iris_xxh3_64.argtypes = [ctypes.c_void_p, c_size]
    lib.iris_xxh3_64.restype = ctypes.c_uint64
    lib.iris_archive_read_file.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p, c_size, ctypes.POINTER(c_size),
                                           ctypes.c_char_p, c_size]
    lib.iris_archive_read_file.restype = ctypes.c_int


def library():
    """The loaded libiris (a ctypes.CDLL), or None."""
    if not _tried:
        _load()
    return _lib


def why_not() -> str:
    library()
    return _why


def _raise(code: int, msg) -> None:
    text = msg.value.decode("utf-8", "replace")
    raise (CorruptError if code == _CORRUPT else IrisError)(text)


def handle(archive) -> ctypes.c_void_p:
    """libiris's handle of `archive` (opened once, closed with the archive)."""
    h = getattr(archive, "_native_handle", None)
    if h is not None:
        return h
    lib = library()
    out = ctypes.c_void_p()
    msg = ctypes.create_string_buffer(1024)
    code = lib.iris_archive_open(os.fsencode(archive.path), 0, ctypes.byref(out), msg, len(msg))
    if code != _OK:
        _raise(code, msg)
    archive._native_handle = out
    # Closed with the archive (Archive.close calls it) or when the archive is collected.
    archive._native_close = weakref.finalize(archive, lib.iris_archive_close, out)
    return out


def _index(lib, h, tensor) -> int:
    msg = ctypes.create_string_buffer(1024)
    index = ctypes.c_uint64()
    code = lib.iris_archive_find_tensor(h, tensor.name.encode(), ctypes.byref(index), msg, len(msg))
    if code != _OK:
        _raise(code, msg)
    return index.value


def dequantize(archive, tensor, dtype: str) -> np.ndarray:
    """The whole tensor as `dtype` (iris_dequantize), BF16 as uint16 bits."""
    lib = library()
    h = handle(archive)
    index = _index(lib, h, tensor)
    c_dtype, np_dtype = _DTYPES[dtype]
    out = np.empty(tensor.shape, dtype=np_dtype)
    msg = ctypes.create_string_buffer(1024)
    code = lib.iris_dequantize(h, index, c_dtype, out.ctypes.data_as(ctypes.c_void_p), out.nbytes, 0, msg, len(msg))
    if code != _OK:
        _raise(code, msg)
    return out


def dequantize_rows(archive, tensor, dtype: str, r0: int, r1: int, k: int) -> np.ndarray:
    """Rows [r0, r1) of the tensor viewed as [rows, k] (iris_dequantize_rows, which reads only
    the tile stripes of those rows), as [r1 - r0, k] of `dtype`, BF16 as uint16 bits."""
    lib = library()
    h = handle(archive)
    index = _index(lib, h, tensor)
    c_dtype, np_dtype = _DTYPES[dtype]
    out = np.empty((r1 - r0, k), dtype=np_dtype)
    if out.size == 0:
        return out
    msg = ctypes.create_string_buffer(1024)
    code = lib.iris_dequantize_rows(h, index, r0, r1, c_dtype, out.ctypes.data_as(ctypes.c_void_p), out.nbytes, 0, msg,
                                    len(msg))
    if code != _OK:
        _raise(code, msg)
    return out


def _require():
    lib = library()
    if lib is None:
        raise IrisError(f"neither the xxhash/zstandard packages nor libiris are available: {_why}")
    return lib


def xxh3(data) -> int:
    lib = _require()
    buf = np.ascontiguousarray(np.frombuffer(data, dtype=np.uint8) if isinstance(data, (bytes, bytearray)) else data)
    return int(lib.iris_xxh3_64(buf.ctypes.data_as(ctypes.c_void_p), buf.nbytes))


def read_file(archive, name: str) -> bytes:
    lib = _require()
    h = handle(archive)
    msg = ctypes.create_string_buffer(1024)
    size = ctypes.c_size_t()
    code = lib.iris_archive_read_file(h, name.encode(), None, 0, ctypes.byref(size), msg, len(msg))
    if code != _OK:
        _raise(code, msg)
    out = ctypes.create_string_buffer(max(size.value, 1))
    code = lib.iris_archive_read_file(h, name.encode(), out, size.value, ctypes.byref(size), msg, len(msg))
    if code != _OK:
        _raise(code, msg)
    return out.raw[: size.value]
