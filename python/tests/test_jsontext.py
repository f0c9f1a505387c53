"""The vectorized scan of untrusted JSON (iris/_jsontext.py) against a walk one character at a
time, as formats/json_limits.cpp's max_depth_of walks, on random documents whose strings hold
brackets, colons, quotes and backslashes."""

import json
import random

from iris import _jsontext

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
