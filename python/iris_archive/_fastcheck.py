"""The tensor entries of a manifest checked in bulk (issue 24 item 5: a 36k-tensor MoE
manifest opens in under a second on 2 cores).

The tensors of a big archive share a handful of descriptors (shape, dtype, format, params,
layout) and differ in their names, offsets, checksums and source names. Each distinct
descriptor is checked once, by the same code as ManifestReader (_manifest.py), under a key
that keeps the values' types (marshal's bytes: true, 1 and 1.0 are equal in Python, not in
the schema); what differs between tensors is checked inline, without messages. An entry that
is not plain (keys the schema does not name, a name that is not ASCII, ...) is checked by
ManifestReader on its own. Anything wrong raises Slow, and ManifestReader then checks
the whole list again, one entry at a time, to report the first problem in document order
with its message: the fast path only ever accepts what the slow one accepts
(tests/test_fastcheck.py). It also counts the keys and the depth of the entries' objects,
which _jsontext.refuse compares with the text (a key twice, nesting too deep).

Row by row, each entry's objects visited once while they are in the cache: a variant that
pulled each field out of all entries first (map, itemgetter, set of types per column) took
twice as long, every pass over 36k scattered objects missing the cache."""

from __future__ import annotations

import marshal
from itertools import chain
from operator import itemgetter

from . import _format
from ._errors import IrisError
from ._format import ALIGNMENT
from ._jsontext import measure

_ENTRY = itemgetter("name", "shape", "dtype", "format", "layout", "components")
_COMPONENT = itemgetter("role", "dtype", "shape", "bytes", "offset", "xxh3")
_PART = itemgetter("role", "name", "dtype", "shape")
_ROLES = frozenset(_format.SOURCE_ROLES)  # (source records only)


class Slow(Exception):
    """The fast path cannot vouch for the list: check it one entry at a time."""


class _NotPlain(Exception):
    """This entry is checked by ManifestReader on its own."""


def check_tensors(reader, tensors: list) -> tuple:
    """Checks the entries of `tensors`; returns (name -> tensor, keys held by their objects,
    nesting depth of the list). Raises Slow when one is wrong, or some dims or names must be
    checked again in order.

    Lets go of each entry once checked (sets its place in the list to None): what its tensor
    does not keep is freed then, while it is in the cache (freed with the whole document at
    the end, it took 45 ms of a 36k-tensor open, about as long as checking it). After Slow,
    the list must be parsed again."""
    made, counted, deepest = {}, 0, 0
    described, slow_described = {}, {}  # descriptor key -> what the descriptor implies
    shapes = []  # the components' and source parts' shapes, whose dims are checked together
    hashes = []  # the components' checksums, checked together
    for i, tj in enumerate(tensors):
        try:
            t, n, depth = _plain_entry(reader, tj, described, shapes, hashes)
        except _NotPlain:
            if type(tj) is not dict:
                raise Slow from None
            try:
                t = reader._check_tensor(tj, slow_described)
            except IrisError:
                raise Slow from None
            n, depth = measure(tj)
        tensors[i] = tj = None
        made[t.name] = t
        counted += n
        if depth > deepest:
            deepest = depth
    if len(made) != len(tensors) or not _all_hex16(hashes):  # a name twice, a checksum not hex
        raise Slow
    dims = list(chain.from_iterable(shapes))
    if dims and (set(map(type, dims)) != {int} or min(dims) < 0 or max(dims) >= _format.MAX_DIM):
        raise Slow
    return made, counted, 1 + deepest


def _all_hex16(hashes: list) -> bool:
    """Whether every checksum is 16 lowercase hex digits: one join and one translate, not a
    regular expression per component."""
    try:
        joined = "".join(hashes).encode("ascii")
    except (TypeError, UnicodeEncodeError):  # not a string, not ASCII
        return False
    return not joined.translate(None, b"0123456789abcdef") and set(map(len, hashes)) <= {16}


def _plain_entry(reader, tj, described: dict, shapes: list, hashes: list) -> tuple:
    """A tensor entry with the keys the schema names and no others, and an ASCII name:
    (tensor, keys held by its objects, its nesting depth). Raises _NotPlain for any other
    entry, Slow when a value is wrong."""
    try:
        name, shape, dt, fmt, lj, comps = _ENTRY(tj)
        params, source = tj.get("params"), tj.get("source")
    except (KeyError, TypeError, AttributeError):
        raise _NotPlain from None
    if len(tj) != 6 + (params is not None) + (source is not None) or type(name) is not str or not name.isascii():
        raise _NotPlain
    if "\0" in name:
        raise Slow
    key = marshal.dumps((shape, dt, fmt, params, lj), 2)
    d = described.get(key)
    if d is None:
        d = described[key] = _describe(reader, shape, dt, fmt, lj, tj, params)
    as_shape, typed, layout, geometry, specs, n, depth = d
    if type(comps) is not list or len(comps) != len(specs):
        raise Slow
    components = []
    data_size = reader._data_size
    for (role, cdt, cshape, nbytes, as_tuple), cj in zip(specs, comps):
        # The six keys the schema names (values that hold no object), and no others.
        if type(cj) is not dict or len(cj) != 6:
            raise _NotPlain
        try:
            listed = _COMPONENT(cj)
        except KeyError:
            raise Slow from None
        off = listed[4]
        if (listed[0] != role or listed[1] != cdt or type(listed[3]) is not int or listed[3] != nbytes
                or listed[2] != cshape or type(off) is not int or off < 0 or off % ALIGNMENT or off + nbytes > data_size):
            raise Slow
        shapes.append(listed[2])  # equal to the descriptor's: its dims' types are checked later
        hashes.append(listed[5])
        components.append((role, cdt, as_tuple, off, nbytes, listed[5]))
    n += len(tj) + 6 * len(comps)
    if source is None:
        source = {}
    else:
        n += _source(source, shapes)
    t = reader._make_tensor(name, as_shape, dt, fmt, {} if params is None else params, dict(layout), source, typed,
                            geometry, components)
    return t, n, depth


def _source(source, shapes: list) -> int:
    """Checks a provenance record as ManifestReader._check_source does, the dims of its parts'
    shapes left to the caller (appended to `shapes`); returns the keys its objects hold."""
    if type(source) is not dict:
        raise Slow
    parts = source.get("tensors")
    if len(source) != (parts is not None) + ("requantized_from" in source):
        raise _NotPlain
    if "requantized_from" in source and type(source["requantized_from"]) is not str:
        raise Slow
    if parts is None:
        return len(source)
    if type(parts) is not list:
        raise Slow
    n = len(source)
    for p in parts:
        if type(p) is not dict:
            raise Slow
        try:
            role, pname, pdt, pshape = _PART(p)
        except KeyError:
            raise Slow from None
        file = p.get("file")
        if len(p) != 4 + (file is not None):
            raise _NotPlain
        if (type(role) is not str or role not in _ROLES or type(pname) is not str or type(pdt) is not str
                or (file is not None and type(file) is not str) or type(pshape) is not list or len(pshape) > _format.MAX_DIMS):
            raise Slow
        shapes.append(pshape)
        n += len(p)
    return n


def _describe(reader, shape, dt, fmt, lj, tj: dict, params) -> tuple:
    """What a descriptor implies, checked by ManifestReader: (shape tuple, typed params,
    layout, tiled geometry or None, component specs as (role, dtype, shape list, bytes, shape
    tuple), keys held by params and layout, the depth of an entry with this descriptor)."""
    from ._manifest import _check_dims

    try:  # the messages are ManifestReader's to give, in document order
        _check_dims("", "shape", shape)
        typed, layout, geometry, specs = reader._check_descriptor("", shape, dt, fmt, tj, lj)
    except IrisError:
        raise Slow from None
    specs = [(role, cdt, list(cshape), nbytes, tuple(cshape)) for role, cdt, cshape, nbytes in specs]
    (pk, pd), (lk, ld) = measure(params), measure(lj)
    # An entry is nested 5 deep at most (itself, source, its parts, a part, its shape) but for
    # what params and layout hold.
    return tuple(shape), typed, layout, geometry, specs, pk + lk, max(5, 1 + pd, 1 + ld)
