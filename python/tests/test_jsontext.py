"""The vectorized scan of untrusted JSON (iris/_jsontext.py) against a walk one character at a
time, as formats/json_limits.cpp's max_depth_of walks, on random documents whose strings hold
brackets, colons, quotes and backslashes."""

import functools
import json
import random

import pytest
from test_hostile import manifest_of, with_manifest

import iris
from iris import _archive, _jsontext, _manifest

TRICKY = ['[', ']', '{', '}', ':', '"', '\\', '\\"', '\\\\', 'x', 'é', '\u2028', ' ']


def walked(text: str) -> tuple:
    """(deepest nesting, colons) outside strings, one character at a time."""
    depth = deepest = colons = 0
    in_string = escaped = False
    for c in text:
        if in_string:
            if escaped:
                escaped = False
            elif c == "\\":
                escaped = True
            elif c == '"':
                in_string = False
        elif c == '"':
            in_string = True
        elif c in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif c in "]}":
            depth -= 1
        elif c == ":":
            colons += 1
    return deepest, colons


def random_value(rng: random.Random, depth: int):
    kind = rng.randrange(6 if depth < 12 else 3)
    if kind == 0:
        return "".join(rng.choice(TRICKY) for _ in range(rng.randrange(6)))
    if kind == 1:
        return rng.choice([0, 7, -3, 1.5, True, None])
    if kind == 2:
        return []
    if kind in (3, 4):
        return {"".join(rng.choice(TRICKY) for _ in range(rng.randrange(4))): random_value(rng, depth + 1)
                for _ in range(rng.randrange(4))}
    return [random_value(rng, depth + 1) for _ in range(rng.randrange(4))]


def members(v) -> int:
    if isinstance(v, dict):
        return len(v) + sum(map(members, v.values()))
    return sum(map(members, v)) if isinstance(v, list) else 0


def test_scan_counts_what_a_walk_counts():
    rng = random.Random(24)
    for trial in range(400):
        value = random_value(rng, 0)
        doc = json.dumps(value, ensure_ascii=trial % 2 == 0, indent=None if trial % 3 else 1)
        depth, colons = _jsontext.scan(doc.encode())
        assert (depth, colons) == walked(doc), doc
        assert colons == members(value), doc


def test_scan_of_text_without_brackets():
    assert _jsontext.scan(b"7") == (0, 0)
    assert _jsontext.scan(b'"[{:"') == (0, 0)
    assert _jsontext.scan(b"[" * 70 + b"]" * 70) == (70, 0)


def twice(text: str, key: str, after: str = "") -> str:
    """`text` with the first member named `key` (a number or string value) after `after`
    written twice."""
    at = text.index(f'"{key}": ', text.index(after))
    end = at + len(key) + 4
    end = text.index('"', end + 1) + 1 if text[end] == '"' else min(text.find(c, end) % len(text) for c in ",}")
    return text[:end] + ", " + text[at:end] + text[end:]


# A key written twice in each kind of object a manifest holds: json.loads keeps one value,
# and the keys counted after parsing fall one short of the text's members.
DUPLICATED = {"top level": ("format", ""), "provenance": ("tile_k", ""), "embedded file": ("encoding", ""),
              "tensor entry": ("format", '"tensors": ['), "params": ("block_size", ""), "layout": ("kind", '"layout": '),
              "component": ("role", '"components": '), "source part": ("file", '"source": {"tensors"'),
              "a later tensor": ("dtype", '"name": "model.layers.1.')}


@pytest.mark.parametrize("case", list(DUPLICATED))
def test_key_twice_anywhere_is_refused(converted, tmp_path, case):
    key, after = DUPLICATED[case]
    good = converted("gptoss-mxfp4").read_bytes()
    text = json.dumps(manifest_of(good))
    bad = tmp_path / "bad.iris"
    bad.write_bytes(with_manifest(good, twice(text, key, after)))
    with pytest.raises(iris.IrisError, match=f"^{bad}: manifest: key '{key}' appears twice$"):
        iris.open(bad)


def test_key_twice_is_reported_before_a_schema_error(converted, tmp_path):
    good = converted("gptoss-mxfp4").read_bytes()
    m = manifest_of(good)
    m["alignment"] = 512
    bad = tmp_path / "bad.iris"
    bad.write_bytes(with_manifest(good, twice(json.dumps(m), "tile_n", '"layout": ')))
    with pytest.raises(iris.IrisError, match="key 'tile_n' appears twice"):
        iris.open(bad)


def test_keys_counted_are_the_members_of_the_text(converted):
    for fixture in ("gptoss-mxfp4", "llama-nf4-dq", "llama-fp8-block", "llama-bf16"):
        a = iris.open(converted(fixture))
        reader = _manifest.ManifestReader(a.path, a.version, a._data_size, functools.partial(_archive.Tensor, a))
        assert reader._check_manifest(json.loads(a.manifest)) == _jsontext.scan(a._manifest_bytes)[1]
