"""The manifest of an archive: its JSON parsed as untrusted text (nesting depth, duplicate
keys, no NaN) and checked against the schema the C++ reader checks (FORMAT.md sections 3, 4
and 7), with the same kind of messages."""

from __future__ import annotations

import contextlib
import gc
import re
from itertools import chain
from operator import itemgetter

import numpy as np

from . import _fastcheck, _format, _jsontext
from ._errors import IrisError
from ._jsontext import measure, shown

ALIGNMENT = _format.ALIGNMENT
MAX_MANIFEST = 256 << 20
_OFFSET, _BYTES = itemgetter(3), itemgetter(4)  # of a component tuple


@contextlib.contextmanager
def _collector_paused():
    """The cyclic garbage collector off while a manifest is parsed and checked: that makes
    some ten objects per tensor, all kept, and each collection the allocations set off walks
    the whole growing heap again (it doubled the time of a 36k-tensor open); none of it is
    garbage.

    On the way out, the objects made go straight to the oldest generation (gc.freeze, then
    gc.unfreeze: list splices, no walk), as objects that live as long as the archive would
    after two collections: else the first young collection after gc.enable() walked all 400k
    of a 36k-tensor open at its end (0.2 s), and the next one walked them again. Objects the
    caller made meanwhile move with them (their cycles wait for a full collection). A process
    that froze objects itself (gc.get_freeze_count()) keeps them frozen: nothing is moved."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            if hasattr(gc, "freeze") and gc.get_freeze_count() == 0:
                gc.freeze()
                gc.unfreeze()
            gc.enable()


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
_ROLE_SET = frozenset(_format.SOURCE_ROLES)  # (source records only)


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
    return f"{shown(r[2])}/{r[3]}" if r[3] is not None else f"file {shown(r[2])}"


def read(path: str, text: bytes, version: tuple, data_size: int, make_tensor) -> "ManifestReader":
    """Parses and checks the manifest `text` (bytes) of the archive at `path`; raises IrisError
    saying what is wrong. make_tensor(name, shape, dtype, format, params, layout, source,
    typed, geometry, components) makes each tensor."""
    try:
        decoded = text.decode("utf-8")
    except UnicodeDecodeError:
        raise IrisError(f"{path}: manifest: not valid UTF-8") from None
    reader = ManifestReader(path, version, data_size, make_tensor, text, decoded)
    what = reader.what
    with _collector_paused():
        m = _jsontext.parse(what, text, decoded)
        try:
            keys, depth = reader._check_manifest(m)
        except IrisError:  # too deep, or a key twice, is what the C++ reader reports first
            if not reader.refused:
                _jsontext.refuse(what, text, decoded)
            raise
        _jsontext.refuse(what, text, decoded, keys, depth)
        del m  # the rest of the document (each tensor entry went once checked), before the collector is back
    return reader


class ManifestReader:
    """What a checked manifest holds: metadata, model_type, tensors (name -> tensor), files
    (the embedded files' entries) and ranges (the begins and ends of the data ranges in use,
    sorted)."""

    def __init__(self, path: str, version: tuple, data_size: int, make_tensor, raw: bytes = b"", text: str = ""):
        """raw, text: the manifest's bytes and text, parsed again when something is wrong (see
        check_tensors)."""
        self.path, self.version, self._data_size, self._make_tensor = path, version, data_size, make_tensor
        self.what, self._raw, self.text = f"{path}: manifest", raw, text
        self.refused = False  # whether _jsontext.refuse() has run

    def _check_manifest(self, m) -> tuple:
        """Checks the parsed manifest; returns (keys its objects hold, its nesting depth), for
        refuse()."""
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
        for key in ("part", "set", "set_member", "rank"):
            if key in m and not isinstance(m[key], dict):
                raise IrisError(P + f"'{key}' is not an object")
        # "part": a conversion part's record (FORMAT.md section 9), when the file is one; "set" and
        # "set_member": an archive set's index and member records (section 10; iris._set checks them).
        # "rank": a tensor-parallel rank's record (section 11).
        self.metadata = {k: m[k] for k in ("model_type", "tool", "provenance", "format_version", "part", "set", "set_member",
                                           "rank") if k in m}
        self.model_type = m.get("model_type", "")
        try:
            self.tensors, keys, depth = _fastcheck.check_tensors(self, tensors)
        except _fastcheck.Slow:  # something is wrong: found again here, in order, with its message,
            # in entries parsed again (see check_tensors), by the parse that finds a key twice
            # (reported first, after a depth beyond the limit, as by the C++ reader).
            self.refused = True
            tensors = _jsontext.refuse(self.what, self._raw, self.text)["tensors"]
            self.tensors = self._check_tensors(tensors, P)
            keys, depth = measure(tensors)
        files = m.get("files", [])
        if not isinstance(files, list):
            raise IrisError(P + "'files' is not a list")
        self.files = self._check_files(files, P)
        self._check_ranges(files)
        for key, v in m.items():
            if key != "tensors":
                held, d = measure(v)
                keys, depth = keys + held, max(depth, d)
        return len(m) + keys, 1 + depth

    def _check_tensors(self, tensors: list, P: str) -> dict:
        """The tensor entries checked one at a time: the first problem raises, with its message."""
        made, described = {}, {}
        for tj in tensors:
            if not isinstance(tj, dict):
                raise IrisError(P + "a tensor entry is not an object")
            t = self._check_tensor(tj, described)
            if t.name in made:
                raise IrisError(f"{self.path}: tensor '{shown(t.name)}': name appears twice in the manifest")
            made[t.name] = t
        return made

    def _check_ranges(self, files: list) -> None:
        """No two non-empty data ranges share a byte; sets self.ranges, the begins and ends of
        every range in order (numpy arrays), for verify(): every other byte must be zero.
        Vectorized: the ranges are named only when two overlap."""
        comps = [c for t in self.tensors.values() for c in t._components]
        n = len(comps) + len(files)
        begin = np.fromiter(chain(map(_OFFSET, comps), (f["offset"] for f in files)), np.int64, n)
        end = begin + np.fromiter(chain(map(_BYTES, comps), (f["bytes"] for f in files)), np.int64, n)
        order = np.lexsort((end, begin))
        self.ranges = begin, end = begin[order], end[order]
        full = end > begin
        ends = np.maximum.accumulate(end[full])
        if np.any(begin[full][1:] < ends[:-1]):
            ranges = [(c[3], c[3] + c[4], t.name, c[0]) for t in self.tensors.values() for c in t._components]
            ranges += [(f["offset"], f["offset"] + f["bytes"], f["name"], None) for f in files]
            self._check_overlaps(sorted(ranges))

    def _check_format_version(self, v, P) -> None:
        """format_version must name the version the preamble gives: a reader trusts one of them."""
        if v is None:
            raise IrisError(P + "'format_version' is missing")
        if type(v) is not list or len(v) != 2 or not all(_format.is_uint(x) for x in v):
            raise IrisError(P + "'format_version' is not [major, minor]")
        if tuple(v) != self.version:
            raise IrisError(P + f"format_version [{v[0]}, {v[1]}] disagrees with the preamble's {self.version[0]}.{self.version[1]}")

    def _check_files(self, files: list, P: str) -> list:
        names = set()
        for fj in files:
            if not isinstance(fj, dict) or not isinstance(fj.get("name"), str):
                raise IrisError(P + "file: 'name' missing or not a string")
            name = fj["name"]
            fctx = f"{self.path}: embedded file '{shown(name)}': "
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
        ctx = f"{self.path}: tensor '{shown(name)}': "
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
        return self._make_tensor(name, tuple(shape), dt, fmt, params, dict(layout), source, typed, geometry, components)

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
            geometry = _format.geometry(ctx, fmt, shape, layout, typed.get("block_size", 0), typed.get("bits"))
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
