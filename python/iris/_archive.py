"""The reader: an archive mapped read-only, validated as FORMAT.md section 7 says, its tensors
as zero-copy numpy views of the mapping."""

from __future__ import annotations

import contextlib
import gc
import json
import mmap
import os
import re
import stat
import struct

import numpy as np

from . import _decode, _format
from ._errors import CorruptError, IrisError

MAGIC = b"IRISMDL2"
PREAMBLE = 64
ALIGNMENT = 4096
MAX_MANIFEST = 256 << 20
MAX_JSON_DEPTH = 64


def _optional(module: str):
    """The module if it can be imported, else None (tried once; every checksum asks)."""
    if module not in _OPTIONAL:
        try:
            _OPTIONAL[module] = __import__(module)
        except ImportError:
            _OPTIONAL[module] = None
    return _OPTIONAL[module]


_OPTIONAL: dict = {}


def _xxh3(data) -> int:
    """XXH3-64 with the xxhash package, else with libiris (iris_xxh3_64)."""
    xxhash = _optional("xxhash")
    if xxhash is None:
        from . import _native

        return _native.xxh3(data)
    return xxhash.xxh3_64_intdigest(data)


_BRACKETS = np.zeros(256, bool)
_BRACKETS[list(b"[]{}")] = True
_QUOTE, _OPEN_LIST, _OPEN_OBJECT = ord('"'), ord("["), ord("{")


def _json_depth_ok(raw: bytes) -> bool:
    """Nesting depth of JSON text <= MAX_JSON_DEPTH, counted outside strings, before parsing
    (so a hostile manifest cannot exhaust the recursion limit). Vectorized, because a walk one
    character at a time in Python took seconds on a 36k-tensor manifest: a bracket is outside
    every string when an even number of quotes precede it, once escaped quotes are blanked
    (backslashes appear only inside strings, and pair up from the left, as bytes.replace
    scans)."""
    if b"\\" in raw:
        raw = raw.replace(b"\\\\", b"  ").replace(b'\\"', b"  ")
    b = np.frombuffer(raw, np.uint8)
    quotes = np.flatnonzero(b == _QUOTE)
    brackets = np.flatnonzero(_BRACKETS[b])
    kinds = b[brackets[np.searchsorted(quotes, brackets) % 2 == 0]]
    step = np.where((kinds == _OPEN_LIST) | (kinds == _OPEN_OBJECT), 1, -1)
    return not step.size or int(np.cumsum(step).max()) <= MAX_JSON_DEPTH


@contextlib.contextmanager
def _collector_paused():
    """The cyclic garbage collector off while a manifest is parsed and checked: that makes
    some ten objects per tensor, all kept, and each collection the allocations set off walks
    the whole growing heap again (it doubled the time of a 36k-tensor open); none of it is
    garbage."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _shown(name: str) -> str:
    """A name as messages print it: as is when printable, else with Python's escapes (a NUL as
    \\x00, a lone surrogate as \\ud800), so a message is one line of valid text."""
    return name if name.isprintable() else repr(name)[1:-1]


def _dupes_rejected(pairs):
    d = dict(pairs)
    if len(d) != len(pairs):  # rare: find the key that came twice
        seen = set()
        for k, _ in pairs:
            if k in seen:
                raise IrisError(f"key '{_shown(k)}' appears twice")
            seen.add(k)
    return d


def _no_constants(name):
    """NaN, Infinity and -Infinity are not JSON (RFC 8259); Python's parser takes them unless told."""
    raise ValueError(f"{name} is not a JSON value")


def _name_problem(name: str) -> str | None:
    """Why a tensor or embedded-file name is refused, or None: the C API hands names out as C
    strings, so a NUL would cut one short, and a lone surrogate (from an escape such as
    \\ud800) is not UTF-8."""
    if "\0" in name:
        return "name contains a NUL character"
    if not name.isascii():
        try:
            name.encode("utf-8")
        except UnicodeEncodeError:
            return "name is not valid UTF-8"
    return None


def _is_plain_file_name(name: str) -> bool:
    """An embedded file's name must be a file name alone: `iris export -o DIR/` writes it into DIR."""
    return name not in ("", ".", "..") and "/" not in name and "\\" not in name


_HEX16 = re.compile("[0-9a-f]{16}").fullmatch
_ROLE_SET = frozenset(_format.ROLES)


def _check_dims(ctx: str, key: str, s) -> list:
    """A shape: a list of at most MAX_DIMS integers in [0, 2^48) (not booleans, not floats)."""
    if type(s) is not list or len(s) > _format.MAX_DIMS:
        raise IrisError(ctx + f"'{key}' missing or not a list of at most {_format.MAX_DIMS} dims")
    for d in s:
        if type(d) is not int or not 0 <= d < _format.MAX_DIM:
            raise IrisError(ctx + f"'{key}' holds {d!r}, not a dimension in [0, 2^48)")
    return s


_ATOMS = frozenset((str, int, bool))


def _frozen(d):
    """A hashable stand-in for a params or layout object that keeps its values' types (True,
    1 and 1.0 are equal in Python, not in the schema); None for one not worth caching (one
    holding a float, whose -0.0 and 0.0 would also compare equal, or a nested object)."""
    if type(d) is not dict:
        return None
    types = tuple(map(type, d.values()))
    if _ATOMS.issuperset(types):
        return tuple(d.items()), types
    items = []
    for k, v in d.items():
        if type(v) in _ATOMS:
            items.append((k, v))
        elif type(v) is list and all(type(x) is int for x in v):  # an FP8 scale_shape
            items.append((k, tuple(v)))
        else:
            return None
    return tuple(items), types


def _descriptor_key(dt, fmt, shape: list, params, layout):
    """The key under which a tensor descriptor's checks are cached, or None (not cached)."""
    p, lj = _frozen(params), _frozen(layout)
    if p is None or lj is None or type(dt) is not str or type(fmt) is not str:
        return None
    return dt, fmt, tuple(shape), p, lj


def _source_part_problem(p, ctx: str):
    """Raises what is wrong with a part of a provenance record."""
    if type(p) is not dict:
        raise IrisError(ctx + "not an object")
    for key in ("role", "name", "dtype"):
        if type(p.get(key)) is not str:
            raise IrisError(ctx + f"'{key}' missing or not a string")
    if p["role"] not in _ROLE_SET:
        raise IrisError(ctx + f"unknown role {p['role']!r}")
    raise IrisError(ctx + "'file' is not a string")


def _range_name(r) -> str:
    """A data range for messages: a tensor's component (name/role) or an embedded file."""
    return f"{_shown(r[2])}/{r[3]}" if r[3] is not None else f"file {_shown(r[2])}"


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
    def components(self) -> dict:
        """Role -> zero-copy numpy view of the component's bytes (read-only), typed and shaped."""
        out = {}
        for role, dt, shape, off, nbytes, _ in self._components:
            raw = self._archive._data(off, nbytes)
            np_dt = _format.DTYPES[dt][1]  # None: sub-byte types stay bytes
            out[role] = raw if np_dt is None else raw.view(np.dtype(np_dt)).reshape(shape)
        return out

    def numpy(self) -> np.ndarray:
        """An unquantized tensor as a zero-copy numpy array (BF16 as uint16)."""
        if self.quantized:
            raise IrisError(f"{self._archive.path}: tensor '{self.name}': {self.format} is quantized; use dequantize()")
        return self.components["data"]

    def dequantize(self, dtype: str = "float32", backend: str = "auto") -> np.ndarray:
        """The tensor as `dtype` ("float32", "float16" or "bfloat16", BF16 returned as uint16),
        bit for bit what `iris export --dtype` writes. backend: "auto" (libiris if found,
        else numpy), "native" or "numpy"."""
        if dtype not in ("float32", "float16", "bfloat16"):
            raise IrisError(f"tensor '{self.name}': dtype must be float32, float16 or bfloat16, not {dtype!r}")
        if backend not in ("auto", "native", "numpy"):
            raise IrisError(f"backend must be auto, native or numpy, not {backend!r}")
        if backend != "numpy":
            from . import _native

            lib = _native.library()
            if lib is not None:
                return _native.dequantize(self._archive, self, dtype)
            if backend == "native":
                raise IrisError(f"libiris not found: {_native.why_not()}")
        return _decode.dequantize(self, dtype)

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

    def __init__(self, path):
        self.path = os.fspath(path)
        try:
            # O_NONBLOCK: a FIFO or device must not wait for a writer; only regular files are read.
            fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        except OSError as e:
            raise IrisError(f"{self.path}: cannot open: {e.strerror}") from None
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise IrisError(f"{self.path}: not a regular file")
            size = st.st_size
            self._mmap = mmap.mmap(fd, 0, access=mmap.ACCESS_READ) if size else None
        except OSError as e:
            raise IrisError(f"{self.path}: cannot map: {e.strerror}") from None
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
        if head[:7] != MAGIC[:7]:
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
        text = b[m_off:m_off + m_size].tobytes()
        self._manifest_bytes = text
        if _xxh3(text) != m_hash:
            raise CorruptError(f"{self.path}: manifest checksum mismatch (corrupt manifest)")
        try:
            decoded = text.decode("utf-8")
        except UnicodeDecodeError:
            self._fail("manifest: not valid UTF-8")
        if not _json_depth_ok(text):
            self._fail(f"manifest: JSON nested deeper than {MAX_JSON_DEPTH}")
        self._manifest_text = decoded
        with _collector_paused():
            try:
                m = json.loads(decoded, object_pairs_hook=_dupes_rejected, parse_constant=_no_constants)
            except IrisError as e:
                self._fail(f"manifest: {e}")
            except (ValueError, RecursionError) as e:
                self._fail(f"manifest: invalid JSON ({e})")
            self._check_manifest(m)
            del m  # what the tensors did not keep goes now, before the collector could visit it

    def _check_manifest(self, m) -> None:
        P = f"{self.path}: manifest: "
        if not isinstance(m, dict):
            raise IrisError(P + "not a JSON object")
        if m.get("format") != "iris":
            raise IrisError(P + "'format' is not \"iris\"")
        if m.get("alignment") != ALIGNMENT or type(m.get("alignment")) is not int:
            raise IrisError(P + "alignment must be 4096")
        self._check_format_version(m.get("format_version"), P)
        if "model_type" in m and not isinstance(m["model_type"], str):
            raise IrisError(P + "'model_type' is not a string")
        tensors = m.get("tensors")
        if not isinstance(tensors, list):
            raise IrisError(P + "'tensors' missing or not a list")
        self.metadata = {k: m[k] for k in ("model_type", "tool", "provenance", "format_version") if k in m}
        self.model_type = m.get("model_type", "")
        ranges = []  # (begin, end, tensor or file name, role or None)
        self.tensors = {}
        described = {}
        for tj in tensors:
            if not isinstance(tj, dict):
                raise IrisError(P + "a tensor entry is not an object")
            t = self._check_tensor(tj, described)
            if t.name in self.tensors:
                raise IrisError(f"{self.path}: tensor '{_shown(t.name)}': name appears twice in the manifest")
            for role, _, _, offset, nbytes, _ in t._components:
                ranges.append((offset, offset + nbytes, t.name, role))
            self.tensors[t.name] = t
        files = m.get("files", [])
        if not isinstance(files, list):
            raise IrisError(P + "'files' is not a list")
        self.files = Files(self, self._check_files(files, P, ranges))
        ranges.sort()
        self._ranges = [(r[0], r[1]) for r in ranges]  # for verify(): every other byte must be zero
        self._check_overlaps(ranges)

    def _check_format_version(self, v, P) -> None:
        """format_version must name the version the preamble gives: a reader trusts one of them."""
        if v is None:
            raise IrisError(P + "'format_version' is missing")
        if type(v) is not list or len(v) != 2 or not all(_format.is_uint(x) for x in v):
            raise IrisError(P + "'format_version' is not [major, minor]")
        if tuple(v) != self.version:
            raise IrisError(P + f"format_version [{v[0]}, {v[1]}] disagrees with the preamble's {self.version[0]}.{self.version[1]}")

    def _check_files(self, files: list, P: str, ranges: list) -> list:
        names = set()
        for fj in files:
            if not isinstance(fj, dict) or not isinstance(fj.get("name"), str):
                raise IrisError(P + "file: 'name' missing or not a string")
            name = fj["name"]
            fctx = f"{self.path}: embedded file '{_shown(name)}': "
            problem = _name_problem(name)
            if problem:
                raise IrisError(fctx + problem)
            if not _is_plain_file_name(name):
                raise IrisError(fctx + "not a plain file name")
            if name in names:
                raise IrisError(fctx + "listed twice")
            names.add(name)
            if fj.get("encoding") not in ("zstd", "raw"):
                raise IrisError(fctx + f"unknown encoding {fj.get('encoding')!r}")
            for k in ("offset", "bytes", "raw_bytes"):
                if not _format.is_uint(fj.get(k)):
                    raise IrisError(fctx + f"'{k}' missing or not an unsigned integer")
            if fj["raw_bytes"] > MAX_MANIFEST:
                raise IrisError(fctx + "raw size too large")
            if fj["encoding"] == "raw" and fj["raw_bytes"] != fj["bytes"]:
                raise IrisError(fctx + "raw file with two sizes")
            self._check_hash(fj, fctx)
            self._check_range(fj["offset"], fj["bytes"], fctx)
            ranges.append((fj["offset"], fj["offset"] + fj["bytes"], name, None))
        return files

    def _check_overlaps(self, ranges: list) -> None:
        """No two non-empty ranges (sorted) share a byte."""
        furthest = None
        for r in ranges:
            begin, end = r[0], r[1]
            if end == begin:
                continue
            if furthest and begin < furthest[1]:
                raise IrisError(f"{self.path}: {_range_name(r)} overlaps {_range_name(furthest)}")
            if not furthest or end > furthest[1]:
                furthest = r

    @staticmethod
    def _check_hash(j, ctx):
        h = j.get("xxh3")
        if type(h) is not str or not _HEX16(h):
            raise IrisError(ctx + "'xxh3' is not 16 lowercase hex digits")

    def _check_range(self, offset, nbytes, ctx):
        if not _format.is_uint(offset):
            raise IrisError(ctx + "'offset' missing or not an unsigned integer")
        if offset % ALIGNMENT:
            raise IrisError(ctx + f"offset {offset} is not 4096-aligned")
        if offset + nbytes > self._data_size:
            raise IrisError(ctx + f"bytes [{offset}, +{nbytes}) run past the {self._data_size}-byte data section")

    @staticmethod
    def _check_source(source, ctx):
        """The provenance record, checked as the C++ reader does (FORMAT.md section 3)."""
        if type(source) is not dict:
            raise IrisError(ctx + "source: not an object")
        if "requantized_from" in source and type(source["requantized_from"]) is not str:
            raise IrisError(ctx + "source: 'requantized_from' is not a string")
        parts = source.get("tensors", [])
        if type(parts) is not list:
            raise IrisError(ctx + "source: 'tensors' is not a list")
        for i, p in enumerate(parts):
            # One test for the common case; the slow path below says what is wrong.
            if (type(p) is not dict or type(p.get("role")) is not str or p["role"] not in _ROLE_SET
                    or type(p.get("name")) is not str or type(p.get("dtype")) is not str or type(p.get("file", "")) is not str):
                _source_part_problem(p, ctx + f"source: tensors[{i}]: ")
            _check_dims(ctx, "shape", p.get("shape"))

    def _check_tensor(self, tj, described: dict):
        """Validates one tensor entry; returns it as a Tensor.
        `described` caches what a descriptor implies (its typed parameters, layout, geometry
        and component specs) by the descriptor's exact values and types: the tensors of a big
        MoE archive share a handful of descriptors, so each is checked once."""
        name = tj.get("name")
        if type(name) is not str:
            raise IrisError(f"{self.path}: tensor '?': 'name' missing or not a string")
        ctx = f"{self.path}: tensor '{_shown(name)}': "
        problem = _name_problem(name)
        if problem:
            raise IrisError(ctx + problem)
        shape = _check_dims(ctx, "shape", tj.get("shape"))
        dt, fmt, params, lj = tj.get("dtype"), tj.get("format"), tj.get("params", {}), tj.get("layout")
        key = _descriptor_key(dt, fmt, shape, params, lj)
        found = described.get(key) if key is not None else None
        if found is None:
            found = self._check_descriptor(ctx, shape, dt, fmt, tj, lj)
            if key is not None:
                described[key] = found
        typed, layout, geometry, specs = found
        source = tj.get("source", {})
        self._check_source(source, ctx)
        components = self._check_components(tj.get("components"), specs, ctx)
        return Tensor(self, name, tuple(shape), dt, fmt, params, dict(layout), source, typed, geometry, components)

    @staticmethod
    def _check_descriptor(ctx: str, shape: list, dt, fmt, tj: dict, lj) -> tuple:
        """dtype, format, parameters and layout of a tensor whose shape is valid; returns the
        typed parameters, the layout, the tiled geometry (or None) and the component specs."""
        if _format.numel(shape) > _format.MAX_NUMEL:
            raise IrisError(ctx + "more than 2^50 elements")
        if type(dt) is not str or dt not in _format.DTYPES:
            raise IrisError(ctx + f"unknown dtype {dt!r}")
        if type(fmt) is str and fmt in _format.FORMATS:
            if type(tj.get("params")) is not dict:
                raise IrisError(ctx + "quantized tensor without a 'params' object")
            typed = _format.check_params(ctx, fmt, tj["params"])
        elif fmt == dt:
            typed = {}
        else:
            raise IrisError(ctx + f"unknown format {fmt!r}")
        if type(lj) is not dict or type(lj.get("kind")) is not str:
            raise IrisError(ctx + "'layout' missing")
        kind = lj["kind"]
        if kind not in ("row_major", "tiled", "flat"):
            raise IrisError(ctx + f"unknown layout kind {kind!r}")
        layout = {"kind": kind}
        descriptor = {"shape": shape, "dtype": dt, "format": "raw" if fmt == dt else fmt, "typed_params": typed, "layout": layout}
        geometry = None
        if kind == "tiled":
            if fmt not in _format.FORMATS:
                raise IrisError(ctx + "layout 'tiled' is not valid for this tensor")
            for k in ("tile_n", "tile_k", "padded_n", "padded_k"):
                if not _format.is_uint(lj.get(k)):
                    raise IrisError(ctx + f"layout: '{k}' missing or not an unsigned integer")
                layout[k] = lj[k]
            geometry = _format.geometry(ctx, fmt, shape, layout, typed.get("block_size", 0))
            if (geometry["padded_n"], geometry["padded_k"]) != (layout["padded_n"], layout["padded_k"]):
                raise IrisError(ctx + f"layout padding {layout['padded_n']}x{layout['padded_k']} disagrees with shape and tile")
            descriptor["geometry"] = geometry
        return typed, layout, geometry, _format.components(ctx, descriptor)

    def _check_components(self, comps, specs: list, ctx: str) -> list:
        """The manifest's components against the (role, dtype, shape, bytes) the descriptor
        implies; returns (role, dtype, shape, offset, bytes, xxh3 hex) of each."""
        if type(comps) is not list:
            raise IrisError(ctx + "'components' missing")
        if len(comps) != len(specs):
            raise IrisError(ctx + f"{len(comps)} components listed, its descriptor needs {len(specs)}")
        out = []
        for (role, dt, shape, nbytes), cj in zip(specs, comps):
            if type(cj) is not dict:
                raise IrisError(ctx + f"component '{role}': not an object")
            listed = (cj.get("role"), cj.get("dtype"), cj.get("shape"), cj.get("bytes"))
            # Types compared too: 4096.0 and true equal 4096 and 1 in Python, not in the schema.
            if listed != (role, dt, shape, nbytes) or type(listed[3]) is not int or not all(type(d) is int for d in listed[2]):
                raise IrisError(ctx + f"component '{role}': listed as {listed} but the descriptor needs {(role, dt, list(shape), nbytes)}")
            self._check_hash(cj, ctx + f"component '{role}': ")
            offset = cj.get("offset")
            if type(offset) is not int or offset < 0 or offset % ALIGNMENT or offset + nbytes > self._data_size:
                self._check_range(offset, nbytes, ctx + f"component '{role}': ")
            out.append((role, dt, tuple(shape), offset, nbytes, cj["xxh3"]))
        return out

    # -- access
    def _data(self, offset: int, nbytes: int) -> np.ndarray:
        start = self._data_offset + offset
        return self._buf[start:start + nbytes]

    @property
    def manifest(self) -> str:
        return self._manifest_text

    def verify(self) -> None:
        """Hashes every tensor component and embedded file, and checks that every other byte
        (the padding, FORMAT.md section 1) is zero, as `iris verify` does: raises CorruptError
        on a mismatch, so a flipped bit anywhere in the file is caught."""
        for t in self.tensors.values():
            t.verify()
        for name in self.files:
            self.files[name]
        m_end = PREAMBLE + len(self._manifest_bytes)
        gaps = [(m_end, self._data_offset)]
        pos = 0
        for begin, end in self._ranges:
            gaps.append((self._data_offset + pos, self._data_offset + begin))
            pos = max(pos, end)
        gaps.append((self._data_offset + pos, self._data_offset + self._data_size))
        for begin, end in gaps:
            if end > begin and np.any(self._buf[begin:end]):
                at = begin + int(np.flatnonzero(self._buf[begin:end])[0])
                raise CorruptError(f"{self.path}: byte at file offset {at} is not zero (padding must be zero; data corrupted)")

    def close(self) -> None:
        self.tensors = {}
        self._buf = None
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


def open(path) -> Archive:  # noqa: A001 - the package's entry point, as safetensors.safe_open / gguf
    return Archive(path)
