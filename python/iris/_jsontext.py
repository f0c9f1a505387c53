"""JSON read as untrusted text, as formats/json_limits.cpp reads it: nested at most
MAX_JSON_DEPTH deep, no key twice in one object, no NaN or Infinity."""

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
    strings: before parsing, so that a hostile manifest cannot exhaust the recursion limit, and
    so that the members of a text that parses can be compared with the keys its objects hold
    (a colon outside strings separates one member). Backslashes appear only inside strings and
    pair up from the left, as bytes.replace scans, so escaped quotes are blanked first.
    Vectorized: a walk one character at a time in Python took seconds on a 36k-tensor
    manifest."""
    if b"\\" in text:
        text = text.replace(b"\\\\", b"  ").replace(b'\\"', b"  ")
    kept = np.frombuffer(text.translate(None, _DROPPED), np.uint8)
    at = np.flatnonzero(kept != _QUOTE)  # the brackets and colons
    # kept[at[j]] has at[j] - j quotes before it: it is outside every string when they are even.
    outside = kept[at[((at - np.arange(at.size)) & 1) == 0]]
    colons = outside == _COLON
    depth = np.cumsum(_STEP[outside[~colons]], dtype=np.int32)  # < 2^31 brackets in 256 MiB
    return int(depth.max(initial=0)), int(np.count_nonzero(colons))


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


def parse(what: str, text: bytes, decoded: str) -> tuple:
    """(value, members) of JSON `text` (bytes) whose UTF-8 decoding is `decoded`; IrisError
    starting with `what` when it is nested too deep or not JSON. A key twice in one object is
    not looked for here: json.loads keeps the last, so the caller compares the keys the
    value's objects hold with the text's members, and calls refuse_duplicates when they
    differ (a hook that looks at every object cost 0.13 s of a 36k-tensor open)."""
    depth, members = scan(text)
    if depth > MAX_JSON_DEPTH:
        raise IrisError(f"{what}: JSON nested deeper than {MAX_JSON_DEPTH}")
    try:
        return json.loads(decoded, parse_constant=_no_constants), members
    except (ValueError, RecursionError) as e:
        raise IrisError(f"{what}: invalid JSON ({e})") from None


def refuse_duplicates(what: str, decoded: str) -> None:
    """Raises IrisError naming a key that one object of JSON text `decoded` (parsed before)
    holds twice; returns when there is none."""
    try:
        json.loads(decoded, object_pairs_hook=_dupes_rejected, parse_constant=_no_constants)
    except IrisError as e:
        raise IrisError(f"{what}: {e}") from None
