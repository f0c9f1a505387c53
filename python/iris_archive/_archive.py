"""The reader: an archive mapped read-only, validated as FORMAT.md section 7 says, its tensors
as zero-copy numpy views of the mapping."""

from __future__ import annotations

import functools
import mmap
import operator
import os
import stat
import struct

import numpy as np

from . import _decode, _dtypes, _format, _manifest, _set
from ._errors import CorruptError, IrisError, open_error
from ._jsontext import shown
from ._optional import optional as _optional
from ._slice import TensorSlice

MAGIC = b"IRISMDL2"
SET_MAGIC = b"IRISSET2"  # an archive set's index (FORMAT.md section 10)
PREAMBLE = 64
ALIGNMENT, MAX_MANIFEST = _manifest.ALIGNMENT, _manifest.MAX_MANIFEST


def _xxh3(data) -> int:
    """XXH3-64 with the xxhash package, else with libiris (iris_xxh3_64)."""
    xxhash = _optional("xxhash")
    if xxhash is None:
        from . import _native

        return _native.xxh3(data)
    return xxhash.xxh3_64_intdigest(data)


class Tensor:
    """One archive tensor: its descriptor and its components as numpy views of the mapping."""

    __slots__ = ("_archive", "name", "shape", "dtype", "format", "params", "layout", "source", "_typed", "_geometry",
                 "_components")

    def __init__(self, archive: "Archive", name: str, shape: tuple, dtype: str, fmt: str, params: dict, layout: dict,
                 source: dict, typed: dict, geometry, components: list):
        """Made by the archive from a validated descriptor; components: (role, dtype, shape,
        offset, bytes, xxh3 hex) of each component, in order."""
        self._archive = archive
        self.name, self.shape, self.dtype, self.format = name, shape, dtype, fmt
        self.params, self.layout, self.source = params, layout, source
        self._typed, self._geometry, self._components = typed, geometry, components

    @property
    def quantized(self) -> bool:
        return self.format != self.dtype

    @property
    def nbytes(self) -> int:
        """The bytes the tensor takes in the archive: its components' sizes added up (what
        `iris inspect` lists as bytes)."""
        return sum(c[4] for c in self._components)

    @property
    def components(self) -> dict:
        """Role -> zero-copy numpy view of the component's bytes (read-only), typed and shaped."""
        out = {}
        for role, dt, shape, off, nbytes, _ in self._components:
            raw = self._archive._data(off, nbytes)
            np_dt = _format.DTYPES[dt][1]  # None: sub-byte types stay bytes
            out[role] = raw if np_dt is None else raw.view(np.dtype(np_dt)).reshape(shape)
        return out

    def numpy(self) -> np.ndarray:
        """An unquantized tensor as a zero-copy, read-only numpy array of its values: BF16 as
        ml_dtypes.bfloat16 when ml_dtypes is installed, else as uint16 holding the bits
        (iris.bfloat16() says which). Sub-byte types (f4, f6) have no numpy type: IrisError
        (their packed bytes are components["data"])."""
        if self.quantized:
            raise IrisError(f"{self._archive.path}: tensor '{shown(self.name)}': {self.format} is quantized; use dequantize()")
        if _format.DTYPES[self.dtype][1] is None:
            raise IrisError(f"{self._archive.path}: tensor '{shown(self.name)}': {self.dtype} has no numpy type; "
                            "components['data'] holds its packed bytes")
        data = self.components["data"]
        return _dtypes.as_bf16(data) if self.dtype == "bf16" else data

    def dequantize(self, dtype="float32", backend: str = "auto") -> np.ndarray:
        """The tensor as `dtype`, bit for bit what `iris export --dtype` writes. dtype:
        "float32", "float16" or "bfloat16", or a numpy dtype (np.float32, np.dtype("float16"),
        ml_dtypes.bfloat16). BF16 comes back as ml_dtypes.bfloat16 when ml_dtypes is installed,
        else as uint16 holding the bits. backend: "auto" (libiris if found, else numpy),
        "native" or "numpy". A new, writable array."""
        out = _dtypes.output_name(dtype, f"tensor '{shown(self.name)}': ")
        native = self._backend(backend)
        self._archive._check_open()
        if native:
            from . import _native

            x = _native.dequantize(self._archive, self, out)
        else:
            x = _decode.dequantize(self, out)
        return _dtypes.as_bf16(x) if out == "bfloat16" else x

    def _backend(self, backend: str) -> bool:
        """Whether `backend` means libiris (True) or the numpy decoder (False)."""
        if backend not in ("auto", "native", "numpy"):
            raise IrisError(f"backend must be auto, native or numpy, not {backend!r}")
        if backend == "numpy":
            return False
        from . import _native

        if _native.library() is not None:
            return True
        if backend == "native":
            raise IrisError(f"libiris not found: {_native.why_not()}")
        return False

    def dequantize_rows(self, start: int, stop: int, dtype="float32", backend: str = "auto") -> np.ndarray:
        """Rows [start, stop) of the tensor viewed as [rows, K] (K its last dimension, rows
        the product of the others: an [E, N, K] stack has E * N rows), as [stop - start, K]
        of `dtype` (as dequantize() takes and gives it). Reads only what those rows need:
        for tiled codes, the stripes of tile_n rows that hold them. 0 <= start <= stop <=
        rows, else IndexError."""
        out = _dtypes.output_name(dtype, f"tensor '{shown(self.name)}': ")
        native = self._backend(backend)
        self._archive._check_open()
        rows, k = _decode.rows_of(self)
        start, stop = operator.index(start), operator.index(stop)
        if not 0 <= start <= stop <= rows:
            raise IndexError(f"{self._archive.path}: tensor '{shown(self.name)}': rows [{start}, {stop}) "
                             f"are not within its {rows} rows")
        if native and self.quantized:
            from . import _native

            x = _native.dequantize_rows(self._archive, self, out, start, stop, k)
        else:  # unquantized: a copy of the rows, converted; no library call needed
            x = _decode.dequantize_rows(self, out, start, stop)
        return _dtypes.as_bf16(x) if out == "bfloat16" else x

    def verify(self) -> None:
        """Hashes the components; raises CorruptError naming the first that differs."""
        for role, _, _, off, nbytes, want in self._components:
            if _xxh3(self._archive._data(off, nbytes)) != int(want, 16):
                raise CorruptError(f"{self._archive.path}: tensor '{self.name}': component '{role}': checksum mismatch")

    def __repr__(self) -> str:
        return f"Tensor({self.name!r}, shape={self.shape}, format={self.format!r}, dtype={self.dtype!r})"


class Files:
    """Embedded files: name -> bytes (decompressed, checksum-checked on access)."""

    def __init__(self, archive: "Archive", entries: list):
        self._archive = archive
        self._entries = {f["name"]: f for f in entries}

    def __contains__(self, name) -> bool:
        return name in self._entries

    def __iter__(self):
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def keys(self):
        return self._entries.keys()

    def info(self, name: str) -> dict:
        """What the manifest says of embedded file `name`: encoding, bytes (stored), raw_bytes
        (decompressed), offset and xxh3 (a copy)."""
        return dict(self._entries[name])

    def __getitem__(self, name: str) -> bytes:
        f = self._entries[name]
        stored = self._archive._data(f["offset"], f["bytes"])
        if _xxh3(stored) != int(f["xxh3"], 16):
            raise CorruptError(f"{self._archive.path}: embedded file '{name}': checksum mismatch")
        if f["encoding"] == "raw":
            return stored.tobytes()
        zstandard = _optional("zstandard")
        if zstandard is None:  # libiris decompresses (and checks) it instead
            from . import _native

            return _native.read_file(self._archive, name)

        try:
            out = zstandard.ZstdDecompressor().decompress(stored.tobytes(), max_output_size=f["raw_bytes"])
        except zstandard.ZstdError as e:
            raise IrisError(f"{self._archive.path}: embedded file '{name}': cannot decompress ({e})") from None
        if len(out) != f["raw_bytes"]:
            raise IrisError(f"{self._archive.path}: embedded file '{name}': decompressed to {len(out)} bytes, not {f['raw_bytes']}")
        return out


class Archive:
    """A read-only, memory-mapped .iris archive whose preamble and manifest have been checked."""

    def __init__(self, path, _as_member: bool = False):
        """_as_member: opened as a member of an archive set, which must not be an index itself
        (no chain or cycle of indexes is followed)."""
        self.path = os.fspath(path)
        self._as_member = _as_member
        try:
            # O_NONBLOCK: a FIFO or device must not wait for a writer; only regular files are read.
            fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        except OSError as e:  # FileNotFoundError and PermissionError keep their class (iris._errors)
            raise open_error(self.path, e) from None
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise IrisError(f"{self.path}: not a regular file")
            size = st.st_size
            self._mmap = mmap.mmap(fd, 0, access=mmap.ACCESS_READ) if size else None
        except OSError as e:
            raise open_error(self.path, e, "map") from None
        finally:
            os.close(fd)
        self._buf = np.frombuffer(self._mmap, dtype=np.uint8) if self._mmap is not None else np.zeros(0, np.uint8)
        self._parse(size)

    # -- validation (FORMAT.md sections 2, 3 and 7)
    def _fail(self, what: str):
        raise IrisError(f"{self.path}: {what}")

    def _parse(self, size: int) -> None:
        b = self._buf
        if size < PREAMBLE:
            self._fail(f"{size} bytes is too short for an .iris archive")
        head = b[:PREAMBLE].tobytes()
        self._set_index = head[:8] == SET_MAGIC
        if head[:7] != MAGIC[:7] and not self._set_index:
            self._fail("not an .iris archive (bad magic)")
        if head[7:8] != b"2":
            raise IrisError(f"{self.path}: .iris format generation {head[7:8]!r} is not supported (this reader reads v2)")
        if struct.unpack_from("<Q", head, 56)[0] != _xxh3(head[:56]):
            raise CorruptError(f"{self.path}: preamble checksum mismatch (corrupt header)")
        major, minor, psize = struct.unpack_from("<HHI", head, 8)
        m_off, m_size, d_off, d_size, m_hash = struct.unpack_from("<QQQQQ", head, 16)
        if major != 2:
            raise IrisError(f"{self.path}: format version {major} is not supported")
        if psize != PREAMBLE:
            self._fail("unexpected preamble size")
        if m_off != PREAMBLE:
            self._fail("manifest does not follow the preamble")
        if m_size == 0 or m_size > MAX_MANIFEST:
            self._fail(f"manifest size {m_size} out of range")
        if d_off % ALIGNMENT or d_off < m_off + m_size:
            self._fail(f"data section offset {d_off} is misaligned or overlaps the manifest")
        if d_off > size or d_size != size - d_off:
            self._fail(f"data section ({d_off} + {d_size} bytes) does not end at the end of the {size}-byte file (truncated?)")
        self.version = (major, minor)
        self._data_offset, self._data_size = d_off, d_size
        self._file_size, self._manifest_xxh3 = size, f"{m_hash:016x}"
        text = b[m_off:m_off + m_size].tobytes()
        self._manifest_bytes = text
        if _xxh3(text) != m_hash:
            raise CorruptError(f"{self.path}: manifest checksum mismatch (corrupt manifest)")
        m = _manifest.read(self.path, text, self.version, d_size, functools.partial(Tensor, self))
        self._manifest_text = m.text
        self.metadata, self.model_type, self.tensors = m.metadata, m.model_type, m.tensors
        self.files = Files(self, m.files)
        self._ranges = m.ranges  # for verify(): every other byte must be zero (numpy arrays: begin, end)
        self._members = []
        if self._set_index != ("set" in self.metadata):
            self._fail("a set record in a file that is not an archive set's index (its magic is IRISMDL2)" if "set" in self.metadata
                       else "an archive set's index (IRISSET2) without a set record")
        if "set_member" in self.metadata:
            _set.member_record(self.metadata["set_member"], self.path)
        if self._set_index:
            if self._as_member:
                self._fail("is itself an archive set's index, listed as a member of another")
            self._members = _set.open_members(self, functools.partial(Archive, _as_member=True))

    @property
    def data_files(self) -> list:
        """The paths of the files the archive is made of: [path] for a single archive; for an
        archive set (FORMAT.md section 10), the index's path and then every member's."""
        return [self.path] + [m.path for m in self._members]

    # -- access
    def _check_open(self) -> None:
        if self._buf is None:
            raise IrisError(f"{self.path}: the archive is closed")

    def _data(self, offset: int, nbytes: int) -> np.ndarray:
        self._check_open()
        start = self._data_offset + offset
        return self._buf[start:start + nbytes]

    @property
    def closed(self) -> bool:
        return self._buf is None

    # -- the safetensors idiom (safe_open): names, and tensors as numpy arrays of their values
    def keys(self) -> list:
        """The tensor names, in archive order."""
        self._check_open()
        return list(self.tensors)

    def __iter__(self):
        self._check_open()
        return iter(self.tensors)

    def __len__(self) -> int:
        self._check_open()
        return len(self.tensors)

    def __bool__(self) -> bool:
        return True  # an archive is a handle, as a file is: true without tensors, and once closed

    def __contains__(self, name) -> bool:
        self._check_open()
        return name in self.tensors

    def _tensor(self, name: str) -> Tensor:
        self._check_open()
        try:
            return self.tensors[name]
        except KeyError:
            shown_name = shown(name) if isinstance(name, str) else repr(name)
            raise KeyError(f"{self.path}: no tensor named '{shown_name}'") from None

    def get_tensor(self, name: str) -> np.ndarray:
        """Tensor `name` as a numpy array of its values, in its shape (safetensors'
        get_tensor). An unquantized tensor is a zero-copy, read-only view of the mapping in
        its own dtype (Tensor.numpy()); a quantized one is dequantized into a new array of the
        float type the archive records for it (its source's: bfloat16, float16 or float32;
        float32 for any other). BF16 is ml_dtypes.bfloat16 when ml_dtypes is installed, else
        uint16 holding the bits (iris.bfloat16() says which). KeyError naming an unknown name."""
        t = self._tensor(name)
        return t.dequantize(_dtypes.logical(t.dtype)) if t.quantized else t.numpy()

    def get_slice(self, name: str) -> TensorSlice:
        """Tensor `name` without reading it: its shape and dtype, and indexing (sl[a:b],
        sl[a:b, c:d]) that reads only the rows asked for: what tensor-parallel loaders use
        to take their shard of a weight (safetensors' get_slice). Values as get_tensor gives
        them; KeyError naming an unknown name."""
        return TensorSlice(self._tensor(name))

    @property
    def manifest(self) -> str:
        return self._manifest_text

    def verify(self) -> None:
        """Hashes every tensor component and embedded file, and checks that every other byte
        (the padding, FORMAT.md section 1) is zero, as `iris verify` does: raises CorruptError
        on a mismatch, so a flipped bit anywhere in the file is caught."""
        self._check_open()
        for m in self._members:  # an archive set: each member as an archive of its own, then the index
            m.verify()
        for t in self.tensors.values():
            if t._archive is self:
                t.verify()
        for name in self.files:
            self.files[name]
        m_end = PREAMBLE + len(self._manifest_bytes)
        gaps = [(m_end, self._data_offset)]
        pos = 0
        for begin, end in zip(*(a.tolist() for a in self._ranges)):
            gaps.append((self._data_offset + pos, self._data_offset + begin))
            pos = max(pos, end)
        gaps.append((self._data_offset + pos, self._data_offset + self._data_size))
        for begin, end in gaps:
            if end > begin and np.any(self._buf[begin:end]):
                at = begin + int(np.flatnonzero(self._buf[begin:end])[0])
                raise CorruptError(f"{self.path}: byte at file offset {at} is not zero (padding must be zero; data corrupted)")

    def close(self) -> None:
        """Unmaps the archive (and closes libiris's handle of it). Arrays already returned stay
        valid; any later read raises IrisError."""
        self.tensors = {}
        self._buf = None
        for m in getattr(self, "_members", []):
            m.close()
        native_close = getattr(self, "_native_close", None)
        if native_close is not None:
            native_close()  # a weakref.finalize: runs once, also if the archive is collected later
            self._native_handle = None
        if self._mmap is not None:
            try:
                self._mmap.close()
            except BufferError:
                pass  # views still alive: the mapping goes with the last of them
            self._mmap = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self) -> str:
        return f"Archive({self.path!r}, {len(self.tensors)} tensors, model_type={self.model_type!r})"


def open_rank(folder, rank: int, world_size: int) -> Archive:
    """Opens rank `rank` of a folder of tensor-parallel rank archives (`iris shard`, `iris convert
    --tp`, FORMAT.md section 11): FOLDER/rank-RRRRR-of-WWWWW.iris, checked to be that rank of a
    world of `world_size`. Its tensors are the rank's boxes; `metadata["rank"]["tensors"]` gives
    each one's logical shape and place. IrisError when the file is not that rank."""
    rank, world_size = operator.index(rank), operator.index(world_size)
    if not 0 <= rank < world_size:
        raise IrisError(f"rank {rank} is not in a world of {world_size}")
    a = Archive(os.path.join(os.fspath(folder), f"rank-{rank:05d}-of-{world_size:05d}.iris"))
    rec = a.metadata.get("rank")
    if (type(rec) is not dict or not _format.is_uint(rec.get("index")) or not _format.is_uint(rec.get("world"))
            or rec["index"] != rank or rec["world"] != world_size):
        a.close()
        raise IrisError(f"{a.path}: not rank {rank} of a world of {world_size} (its rank record says "
                        f"{rec.get('index') if type(rec) is dict else None} of {rec.get('world') if type(rec) is dict else None})")
    return a


def open(path) -> Archive:  # noqa: A001 - the package's entry point, as safetensors.safe_open / gguf
    """Opens and validates the archive at `path` (str or os.PathLike). A usable context
    manager: `with iris.open(p) as a:` closes it on the way out. A missing file raises
    iris.ArchiveNotFoundError, which is both a FileNotFoundError and an IrisError."""
    return Archive(path)
