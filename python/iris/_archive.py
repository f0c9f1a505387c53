"""The reader: an archive mapped read-only, validated as FORMAT.md section 7 says, its tensors
as zero-copy numpy views of the mapping."""

from __future__ import annotations

import json
import mmap
import os
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


def _json_depth_ok(text: str) -> bool:
    """Nesting depth of JSON text <= MAX_JSON_DEPTH, counted outside strings, before parsing
    (so a hostile manifest cannot exhaust the recursion limit)."""
    depth, in_str, esc = 0, False, False
    for ch in text:
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch in "[{":
            depth += 1
            if depth > MAX_JSON_DEPTH:
                return False
        elif ch in "]}":
            depth -= 1
    return True


def _dupes_rejected(pairs):
    d = {}
    for k, v in pairs:
        if k in d:
            raise IrisError(f"key '{k}' appears twice")
        d[k] = v
    return d


class Tensor:
    """One archive tensor: its descriptor and its components as numpy views of the mapping."""

    def __init__(self, archive: "Archive", entry: dict, specs: list):
        self._archive = archive
        self.name: str = entry["name"]
        self.shape: tuple = tuple(entry["shape"])
        self.dtype: str = entry["dtype"]
        self.format: str = entry["format"]
        self.params: dict = dict(entry.get("params", {}))
        self.layout: dict = dict(entry["layout"])
        self.source: dict = entry.get("source", {})
        self._typed = entry.get("typed_params", {})
        self._geometry = entry.get("geometry")
        self._components = []  # (role, dtype, shape, offset, bytes, xxh3)
        for (role, dt, shape, nbytes), cj in zip(specs, entry["components"]):
            self._components.append((role, dt, tuple(shape), cj["offset"], nbytes, int(cj["xxh3"], 16)))

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
            if _xxh3(self._archive._data(off, nbytes)) != want:
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
        if not _json_depth_ok(decoded):
            self._fail(f"manifest: JSON nested deeper than {MAX_JSON_DEPTH}")
        try:
            m = json.loads(decoded, object_pairs_hook=_dupes_rejected)
        except IrisError as e:
            self._fail(f"manifest: {e}")
        except (ValueError, RecursionError) as e:
            self._fail(f"manifest: invalid JSON ({e})")
        self._manifest_text = decoded
        self._check_manifest(m)

    def _check_manifest(self, m) -> None:
        P = f"{self.path}: manifest: "
        if not isinstance(m, dict):
            raise IrisError(P + "not a JSON object")
        if m.get("format") != "iris":
            raise IrisError(P + "'format' is not \"iris\"")
        if m.get("alignment") != ALIGNMENT or isinstance(m.get("alignment"), bool):
            raise IrisError(P + "alignment must be 4096")
        tensors = m.get("tensors")
        if not isinstance(tensors, list):
            raise IrisError(P + "'tensors' missing or not a list")
        self.metadata = {k: m[k] for k in ("model_type", "tool", "provenance", "format_version") if k in m}
        self.model_type = m["model_type"] if isinstance(m.get("model_type"), str) else ""
        ranges = []
        self.tensors = {}
        for tj in tensors:
            if not isinstance(tj, dict):
                raise IrisError(P + "a tensor entry is not an object")
            name = tj.get("name") if isinstance(tj.get("name"), str) else "?"
            ctx = f"{self.path}: tensor '{name}': "
            entry, specs = self._check_tensor(tj, ctx)
            if entry["name"] in self.tensors:
                raise IrisError(ctx + "name appears twice in the manifest")
            comps = tj.get("components")
            if not isinstance(comps, list):
                raise IrisError(ctx + "'components' missing")
            if len(comps) != len(specs):
                raise IrisError(ctx + f"{len(comps)} components listed, its descriptor needs {len(specs)}")
            for (role, dt, shape, nbytes), cj in zip(specs, comps):
                cctx = ctx + f"component '{role}': "
                if not isinstance(cj, dict):
                    raise IrisError(cctx + "not an object")
                got = (cj.get("role"), cj.get("dtype"), cj.get("shape"), cj.get("bytes"))
                if got != (role, dt, list(shape), nbytes) or isinstance(cj.get("bytes"), bool):
                    raise IrisError(cctx + f"listed as {got} but the descriptor needs {(role, dt, list(shape), nbytes)}")
                self._check_hash(cj, cctx)
                ranges.append(self._check_range(cj.get("offset"), nbytes, cctx, f"{entry['name']}/{role}"))
            entry["components"] = comps
            self.tensors[entry["name"]] = Tensor(self, entry, specs)
        files = m.get("files", [])
        if not isinstance(files, list):
            raise IrisError(P + "'files' is not a list")
        names = set()
        for fj in files:
            if not isinstance(fj, dict) or not isinstance(fj.get("name"), str):
                raise IrisError(P + "file: 'name' missing or not a string")
            fctx = f"{self.path}: embedded file '{fj['name']}': "
            if fj["name"] in names:
                raise IrisError(fctx + "listed twice")
            names.add(fj["name"])
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
            ranges.append(self._check_range(fj["offset"], fj["bytes"], fctx, "file " + fj["name"]))
        self.files = Files(self, files)
        ranges.sort()
        self._ranges = [(b, e) for b, e, _ in ranges]  # for verify(): every other byte must be zero
        furthest = None
        for begin, end, what in ranges:
            if end == begin:
                continue
            if furthest and begin < furthest[1]:
                raise IrisError(f"{self.path}: {what} overlaps {furthest[2]}")
            if not furthest or end > furthest[1]:
                furthest = (begin, end, what)

    def _check_hash(self, j, ctx):
        h = j.get("xxh3")
        if not isinstance(h, str) or len(h) != 16 or any(c not in "0123456789abcdef" for c in h):
            raise IrisError(ctx + "'xxh3' is not 16 lowercase hex digits")

    def _check_range(self, offset, nbytes, ctx, what):
        if not _format.is_uint(offset):
            raise IrisError(ctx + "'offset' missing or not an unsigned integer")
        if offset % ALIGNMENT:
            raise IrisError(ctx + f"offset {offset} is not 4096-aligned")
        if offset + nbytes > self._data_size:
            raise IrisError(ctx + f"bytes [{offset}, +{nbytes}) run past the {self._data_size}-byte data section")
        return (offset, offset + nbytes, what)

    @staticmethod
    def _check_source(source, ctx, get_shape):
        """The provenance record, checked as the C++ reader does (FORMAT.md section 3)."""
        if not isinstance(source, dict):
            raise IrisError(ctx + "not an object")
        if "requantized_from" in source and not isinstance(source["requantized_from"], str):
            raise IrisError(ctx + "'requantized_from' is not a string")
        if "tensors" not in source:
            return
        if not isinstance(source["tensors"], list):
            raise IrisError(ctx + "'tensors' is not a list")
        for i, p in enumerate(source["tensors"]):
            pctx = ctx + f"tensors[{i}]: "
            if not isinstance(p, dict):
                raise IrisError(pctx + "not an object")
            for key in ("role", "name", "dtype"):
                if not isinstance(p.get(key), str):
                    raise IrisError(pctx + f"'{key}' missing or not a string")
            if p["role"] not in _format.ROLES:
                raise IrisError(pctx + f"unknown role {p['role']!r}")
            get_shape("shape", p)
            if "file" in p and not isinstance(p["file"], str):
                raise IrisError(pctx + "'file' is not a string")

    def _check_tensor(self, tj, ctx):
        def get_shape(key, o):
            s = o.get(key)
            if not isinstance(s, list) or len(s) > _format.MAX_DIMS:
                raise IrisError(ctx + f"'{key}' missing or not a list of at most {_format.MAX_DIMS} dims")
            for d in s:
                if not _format.is_uint(d) or d >= _format.MAX_DIM:
                    raise IrisError(ctx + f"'{key}' holds {d!r}, not a dimension in [0, 2^48)")
            return s

        if not isinstance(tj.get("name"), str):
            raise IrisError(ctx + "'name' missing or not a string")
        shape = get_shape("shape", tj)
        if _format.numel(shape) > _format.MAX_NUMEL:
            raise IrisError(ctx + "more than 2^50 elements")
        dt = tj.get("dtype")
        if dt not in _format.DTYPES:
            raise IrisError(ctx + f"unknown dtype {dt!r}")
        fmt = tj.get("format")
        if fmt in _format.FORMATS:
            if not isinstance(tj.get("params"), dict):
                raise IrisError(ctx + "quantized tensor without a 'params' object")
            typed = _format.check_params(ctx, fmt, tj["params"])
        elif fmt == dt:
            typed = {}
        else:
            raise IrisError(ctx + f"unknown format {fmt!r}")
        lj = tj.get("layout")
        if not isinstance(lj, dict) or not isinstance(lj.get("kind"), str):
            raise IrisError(ctx + "'layout' missing")
        kind = lj["kind"]
        if kind not in ("row_major", "tiled", "flat"):
            raise IrisError(ctx + f"unknown layout kind {kind!r}")
        layout = {"kind": kind}
        source = tj.get("source", {})
        self._check_source(source, ctx + "source: ", get_shape)
        entry = {"name": tj["name"], "shape": shape, "dtype": dt, "format": "raw" if fmt == dt else fmt,
                 "params": tj.get("params", {}), "typed_params": typed, "layout": layout, "source": source}
        if kind == "tiled":
            if fmt not in _format.FORMATS:
                raise IrisError(ctx + "layout 'tiled' is not valid for this tensor")
            for k in ("tile_n", "tile_k", "padded_n", "padded_k"):
                if not _format.is_uint(lj.get(k)):
                    raise IrisError(ctx + f"layout: '{k}' missing or not an unsigned integer")
                layout[k] = lj[k]
            g = _format.geometry(ctx, fmt, shape, layout, typed.get("block_size", 0))
            if (g["padded_n"], g["padded_k"]) != (layout["padded_n"], layout["padded_k"]):
                raise IrisError(ctx + f"layout padding {layout['padded_n']}x{layout['padded_k']} disagrees with shape and tile")
            entry["geometry"] = g
        specs = _format.components(ctx, entry)
        entry["format"] = fmt
        return entry, specs

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
