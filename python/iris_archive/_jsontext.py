"""JSON read as untrusted text, as formats/json_limits.cpp reads it: nested at most
MAX_JSON_DEPTH deep, no key twice in one object, no NaN or Infinity.

json.loads parses first, without a hook; the caller then counts the keys and the depth of
what it built (measure, or cheaper where it knows the shape of the value) and hands them to
refuse(), which compares them with the text's colons. The text is scanned (scan) only when
the parse failed or the counts differ, and parsed again with a hook that names the key only
when one is there twice."""

from __future__ import annotations

import json

import numpy as np

from ._errors import IrisError

MAX_JSON_DEPTH = 64

# Only quotes, brackets and colons matter to the scan; bytes.translate drops the rest of the
# text at C speed (a 27.6 MiB manifest leaves 6.9 MB), and numpy works on what is left.
_KEPT = b'"[]{}:'
_DROPPED = bytes(c for c in range(256) if c not in _KEPT)
_STEP = np.zeros(256, np.int8)
_STEP[list(b"[{")] = 1
_STEP[list(b"]}")] = -1
_QUOTE, _COLON = ord('"'), ord(":")


def scan(text: bytes) -> tuple:
    """(deepest nesting, members) of a JSON text, counting the brackets and colons outside
    strings, as formats/json_limits.cpp's max_depth_of walks a text that failed to parse.
    Backslashes appear only inside strings and pair up from the left, as bytes.replace scans,
    so escaped quotes are blanked first. Vectorized: a walk one character at a time in Python
    took seconds on a 36k-tensor manifest."""
    if b"\\" in text:
        text = text.replace(b"\\\\", b"  ").replace(b'\\"', b"  ")
    kept = np.frombuffer(text.translate(None, _DROPPED), np.uint8)
    at = np.flatnonzero(kept != _QUOTE)  # the brackets and colons
    # kept[at[j]] has at[j] - j quotes before it: it is outside every string when they are even.
    outside = kept[at[((at - np.arange(at.size)) & 1) == 0]]
    is_colon = outside == _COLON
    depth = np.cumsum(_STEP[outside[~is_colon]], dtype=np.int32)  # < 2^31 brackets in 256 MiB
    return int(depth.max(initial=0)), int(np.count_nonzero(is_colon))


def colons(text: bytes) -> int:
    """The colons of a text, inside strings or not: at least its members (3 ms for 27.6 MiB)."""
    return int(np.count_nonzero(np.frombuffer(text, np.uint8) == _COLON))


def measure(v, room: int = MAX_JSON_DEPTH) -> tuple:
    """(keys held by the objects in a parsed value, its nesting depth: 0 for a scalar, 1 for
    [] or {}). Looks `room` levels down at most (json.loads may have built a value nested
    1000 deep): a depth of room + 1 means deeper than room."""
    if type(v) is dict:
        keys, children = len(v), v.values()
    elif type(v) is list:
        keys, children = 0, v
    else:
        return 0, 0
    if room <= 1:
        return keys, 1 + any(type(x) in (dict, list) for x in children)
    deepest = 0
    for x in children:
        if type(x) in (dict, list):
            k, d = measure(x, room - 1)
            keys += k
            deepest = max(deepest, d)
    return keys, deepest + 1


def shown(name: str) -> str:
    """A name as messages print it: as is when printable, else with Python's escapes (a NUL as
    \\x00, a lone surrogate as \\ud800), so a message is one line of valid text."""
    return name if name.isprintable() else repr(name)[1:-1]


def _dupes_rejected(pairs):
    d = dict(pairs)
    if len(d) != len(pairs):  # rare: find the key that came twice
        seen = set()
        for k, _ in pairs:
            if k in seen:
                raise IrisError(f"key '{shown(k)}' appears twice")
            seen.add(k)
    return d


def _no_constants(name):
    """NaN, Infinity and -Infinity are not JSON (RFC 8259); Python's parser takes them unless told."""
    raise ValueError(f"{name} is not a JSON value")


def parse(what: str, text: bytes, decoded: str):
    """The value of JSON `text` (bytes) whose UTF-8 decoding is `decoded`; IrisError starting
    with `what` when it is not JSON, or nested too deep for the parser to finish (its depth
    said first, as formats/json_limits.cpp says it). The depth of a text that parses, and a
    key twice in one object, are the caller's to check (see refuse): both need a pass over
    every object, which the caller's checks make anyway (scan() before parsing, and a hook
    on every object, cost 0.05 and 0.13 s of a 36k-tensor open)."""
    try:
        return json.loads(decoded, parse_constant=_no_constants)
    except (ValueError, RecursionError) as e:
        if scan(text)[0] > MAX_JSON_DEPTH:
            raise IrisError(f"{what}: JSON nested deeper than {MAX_JSON_DEPTH}") from None
        raise IrisError(f"{what}: invalid JSON ({e})") from None


def refuse(what: str, text: bytes, decoded: str, keys: int = -1, depth: int = -1):
    """Raises IrisError when JSON `text`, parsed before, is nested deeper than MAX_JSON_DEPTH
    or holds a key twice in one object, in that order, as the C++ reader reports them; `keys`
    and `depth` are what the parsed value's objects hold, -1 for unknown (then the text is
    scanned, and parsed again). json.loads keeps the last of a repeated key's values, so a
    value with fewer keys than the text has members held one twice. Returns the value when
    it parsed the text again, else None."""
    if depth < 0:
        depth = scan(text)[0]
    if depth > MAX_JSON_DEPTH:
        raise IrisError(f"{what}: JSON nested deeper than {MAX_JSON_DEPTH}")
    if keys == colons(text) or (keys >= 0 and keys == scan(text)[1]):  # the second for colons inside strings
        return None
    return refuse_duplicates(what, decoded)


def refuse_duplicates(what: str, decoded: str):
    """Raises IrisError naming a key that one object of JSON text `decoded` (parsed before)
    holds twice; returns the value when there is none."""
    try:
        return json.loads(decoded, object_pairs_hook=_dupes_rejected, parse_constant=_no_constants)
    except IrisError as e:
        raise IrisError(f"{what}: {e}") from None
