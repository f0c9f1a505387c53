"""The bulk check of tensor entries (iris/_fastcheck.py) against ManifestReader's one entry at
a time, on randomly edited manifests of the fixtures: the fast path accepts exactly what the
slow one accepts, makes the same tensors, and counts the keys the entries' objects hold and
their depth (exactly, or as at most 7 where it is less)."""

import copy
import functools
import json
import random
import struct

import pytest

from iris_archive import IrisError, _archive, _fastcheck, _manifest
from iris_archive._jsontext import measure

ODD_VALUES = [True, False, 0, 1, 1.0, 32.0, -1, 1 << 48, 1 << 70, "", "x", "é", "a\0b", None, [], {}, [1], [True], [1.0],
              {"a": 1}, {"kind": "row_major"}, [[1]], "0123456789abcdef", "0123456789ABCDEF"]


def manifest(path):
    b = path.read_bytes()
    off, size = struct.unpack_from("<QQ", b, 16)
    (d_size,) = struct.unpack_from("<Q", b, 40)
    return json.loads(b[off:off + size]), d_size


def places(v, at=()):
    """Every (path, value) inside a parsed JSON value."""
    yield at, v
    if isinstance(v, dict):
        for k, x in v.items():
            yield from places(x, at + (k,))
    elif isinstance(v, list):
        for i, x in enumerate(v):
            yield from places(x, at + (i,))


def edited(tensors: list, rng: random.Random) -> list:
    tensors = copy.deepcopy(tensors)
    i = rng.randrange(len(tensors))
    at, value = rng.choice(list(places(tensors[i])))
    parent = tensors[i]
    for k in at[:-1]:
        parent = parent[k]
    how = rng.randrange(10)
    if not at:
        tensors[i] = rng.choice(ODD_VALUES)
    elif how == 0 and isinstance(parent, dict):
        del parent[at[-1]]
    elif how == 1 and isinstance(value, dict):
        value[rng.choice(["extra", "file", "requantized_from", "params", "source"])] = rng.choice(ODD_VALUES)
    elif how == 2 and isinstance(value, int) and not isinstance(value, bool):
        parent[at[-1]] = rng.choice([float(value), value + 4096, value * 2, True if value == 1 else value])
    elif how == 3:
        tensors[i]["name"] = tensors[(i + 1) % len(tensors)]["name"]
    else:
        parent[at[-1]] = rng.choice(ODD_VALUES)
    return tensors


def checked(reader, tensors, fast: bool):
    """(name -> the tensor's fields, keys counted, nesting depth), or the exception's class."""
    try:
        if fast:  # on a copy of the list: the fast path lets go of the entries it checked
            made, keys, depth = _fastcheck.check_tensors(reader, list(tensors))
        else:
            made, (keys, depth) = reader._check_tensors(tensors, ""), measure(tensors)
    except (_fastcheck.Slow, IrisError) as e:
        return type(e)
    fields = {name: tuple(getattr(t, f) for f in _archive.Tensor.__slots__[1:]) for name, t in made.items()}
    return fields, keys, depth


def same(fast, slow) -> bool:
    """The same tensors and keys; the depth the same where it is above 6 (a plain entry is
    taken as nested 5 deep, the list 6, when it is less)."""
    return fast[:2] == slow[:2] and fast[2] >= slow[2] and max(fast[2], 6) == max(slow[2], 6)


@pytest.mark.parametrize("fixture", ["gptoss-mxfp4", "llama-nf4-dq", "llama-fp8-block", "llama-bf16"])
def test_fast_path_accepts_what_the_slow_path_accepts(converted, fixture):
    m, d_size = manifest(converted(fixture))
    reader = _manifest.ManifestReader("x.iris", (2, 0), d_size, functools.partial(_archive.Tensor, None))
    assert same(checked(reader, m["tensors"], True), checked(reader, m["tensors"], False))
    rng = random.Random(fixture)
    outcomes = set()
    for _ in range(300):
        tensors = edited(m["tensors"], rng)
        slow = checked(reader, tensors, False)
        fast = checked(reader, tensors, True)
        if slow is IrisError:
            assert fast is _fastcheck.Slow
        else:
            assert same(fast, slow)
        outcomes.add(slow if isinstance(slow, type) else "accepted")
    assert outcomes == {IrisError, "accepted"}  # the edits reach both outcomes
