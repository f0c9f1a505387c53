"""The vectorized scan of untrusted JSON (iris/_jsontext.py) against a walk one character at a
time, as formats/json_limits.cpp's max_depth_of walks, on random documents whose strings hold
brackets, colons, quotes and backslashes."""

import functools
import json
import random

import pytest
from test_hostile import manifest_of, with_manifest

import iris_archive as iris
from iris_archive import _archive, _jsontext, _manifest

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


def test_keys_and_depth_counted_are_the_texts(converted):
    for fixture in ("gptoss-mxfp4", "llama-nf4-dq", "llama-fp8-block", "llama-bf16"):
        a = iris.open(converted(fixture))
        reader = _manifest.ManifestReader(a.path, a.version, a._data_size, functools.partial(_archive.Tensor, a))
        keys, depth = reader._check_manifest(json.loads(a.manifest))
        assert (depth, keys) == _jsontext.scan(a._manifest_bytes)


def nested(k: int) -> list:
    return json.loads("[" * k + "]" * k)


def first_of(m, quantized: bool) -> dict:
    return next(t for t in m["tensors"] if (t["format"] != t["dtype"]) == quantized)


# Lists nested to exactly the limit, then one level more, in each place where the depth of a
# parsed manifest is counted: (edit putting a value there, levels above that value).
DEEP = {
    "provenance": (lambda m, v: m["provenance"].update(deep=v), 2),
    "embedded file": (lambda m, v: m["files"][0].update(deep=v), 3),
    "tensor entry": (lambda m, v: first_of(m, True).update(deep=v), 3),
    "layout": (lambda m, v: first_of(m, True)["layout"].update(deep=v), 4),
    "params of a raw tensor": (lambda m, v: first_of(m, False).update(params={"deep": v}), 4),
    "component": (lambda m, v: first_of(m, True)["components"][0].update(deep=v), 5),
    "source part": (lambda m, v: first_of(m, True)["source"]["tensors"][0].update(deep=v), 6),
}


@pytest.mark.parametrize("case", list(DEEP))
def test_depth_counted_after_parsing_is_the_texts(converted, tmp_path, case):
    put, above = DEEP[case]
    good = converted("gptoss-mxfp4").read_bytes()
    path = tmp_path / "deep.iris"
    for levels in (64, 65):
        m = manifest_of(good)
        put(m, nested(levels - above))
        text = json.dumps(m)
        assert _jsontext.scan(text.encode())[0] == levels
        path.write_bytes(with_manifest(good, text))
        if levels == 64:
            assert len(iris.open(path).tensors) == len(m["tensors"])
        else:
            with pytest.raises(iris.IrisError, match="nested deeper than 64"):
                iris.open(path)


def test_measure_looks_no_deeper_than_the_limit(converted, tmp_path):
    assert _jsontext.measure(nested(64)) == (0, 64)
    assert _jsontext.measure(nested(65)) == (0, 65)
    assert _jsontext.measure(nested(500)) == (0, 65)  # 65: deeper than 64; no recursion past it
    assert _jsontext.measure({"a": [{"b": 1, "c": {}}], "d": 2}) == (4, 4)
    good = converted("gptoss-mxfp4").read_bytes()
    m = manifest_of(good)
    m["provenance"]["deep"] = nested(500)  # json.loads parses it; the checks must not recurse 500 deep
    path = tmp_path / "deep.iris"
    path.write_bytes(with_manifest(good, json.dumps(m)))
    with pytest.raises(iris.IrisError, match="nested deeper than 64"):
        iris.open(path)


def test_depth_is_reported_before_a_schema_error_or_a_key_twice(converted, tmp_path):
    good = converted("gptoss-mxfp4").read_bytes()
    m = manifest_of(good)
    m["alignment"] = 512
    m["provenance"]["deep"] = nested(70)
    path = tmp_path / "deep.iris"
    path.write_bytes(with_manifest(good, twice(json.dumps(m), "tile_n", '"layout": ')))
    with pytest.raises(iris.IrisError, match="nested deeper than 64"):
        iris.open(path)
