"""Hostile archives: the malformed catalogue of the C API's tests, rebuilt here around edited
manifests (checksums recomputed, so each edit reaches the validation), must raise IrisError
naming the file; damaged data raises CorruptError from verify(); random damage never raises
anything but IrisError."""

import json
import random
import struct

import pytest
import xxhash

import iris_archive as iris


def manifest_of(b: bytes) -> dict:
    off, size = struct.unpack_from("<QQ", b, 16)
    return json.loads(b[off : off + size])


def with_manifest(b: bytes, text: str) -> bytes:
    d_off, d_size = struct.unpack_from("<QQ", b, 32)
    raw = text.encode("utf-8", "surrogateescape") if isinstance(text, str) else text
    new_data = (64 + len(raw) + 4095) // 4096 * 4096
    out = bytearray(b[:64]) + raw + bytes(new_data - 64 - len(raw)) + b[d_off : d_off + d_size]
    struct.pack_into("<QQ", out, 24, len(raw), new_data)
    struct.pack_into("<Q", out, 48, xxhash.xxh3_64_intdigest(raw))
    struct.pack_into("<Q", out, 56, xxhash.xxh3_64_intdigest(bytes(out[:56])))
    return bytes(out)


def first(m, fmt):
    return next(t for t in m["tensors"] if t["format"] == fmt)


def edit(f):
    def make(b):
        m = manifest_of(b)
        f(m)
        return with_manifest(b, json.dumps(m))
    return make


def resealed_preamble(change):
    def make(b):
        x = bytearray(b)
        change(x)
        struct.pack_into("<Q", x, 56, xxhash.xxh3_64_intdigest(bytes(x[:56])))
        return bytes(x)
    return make


def flip(at):
    def make(b):
        x = bytearray(b)
        x[at] ^= 0x04
        return bytes(x)
    return make


mx = lambda m: first(m, "mxfp4")  # noqa: E731

CATALOGUE = {
    "empty file": lambda b: b"",
    "ten bytes": lambda b: b[:10],
    "truncated by one byte": lambda b: b[:-1],
    "truncated inside the manifest": lambda b: b[:100],
    "bad magic": lambda b: b"X" + b[1:],
    "preamble checksum": flip(57),
    "manifest byte flipped": flip(80),
    "manifest size past the file": resealed_preamble(lambda x: struct.pack_into("<Q", x, 24, 1 << 40)),
    "data size disagrees with the file": resealed_preamble(lambda x: struct.pack_into("<Q", x, 40, struct.unpack_from("<Q", x, 40)[0] + 4096)),
    "manifest is not JSON": lambda b: with_manifest(b, '{"format": "iris", '),
    "manifest is a list": lambda b: with_manifest(b, "[1, 2, 3]"),
    "manifest nested 1000 deep": lambda b: with_manifest(b, "[" * 1000 + "]" * 1000),
    "manifest not UTF-8": lambda b: with_manifest(b, b'{"format": "ir\xff\xfeis"}'),
    "duplicate key": lambda b: with_manifest(b, '{"format": "iris", "format": "iris"}'),
    "format is not iris": edit(lambda m: m.update(format="gguf")),
    "alignment 512": edit(lambda m: m.update(alignment=512)),
    "tensors is an object": edit(lambda m: m.update(tensors={})),
    "tensor without a name": edit(lambda m: mx(m).pop("name")),
    "tensor name twice": edit(lambda m: m["tensors"][1].update(name=m["tensors"][0]["name"])),
    "unknown dtype": edit(lambda m: mx(m).update(dtype="q4_k")),
    "unknown format": edit(lambda m: mx(m).update(format="q4_0")),
    "quantized without params": edit(lambda m: mx(m).pop("params")),
    "unknown parameter": edit(lambda m: mx(m)["params"].update(swizzle=1)),
    "missing parameter": edit(lambda m: mx(m)["params"].pop("block_size")),
    "wrong fixed parameter": edit(lambda m: mx(m)["params"].update(nibble_order="high_first")),
    "parameter of the wrong type": edit(lambda m: mx(m)["params"].update(block_size="32")),
    "boolean where a number goes": edit(lambda m: mx(m)["params"].update(block_size=True)),
    "mxfp4 block size 64": edit(lambda m: mx(m)["params"].update(block_size=64)),
    "dimension 2^60": edit(lambda m: mx(m)["shape"].__setitem__(0, 1 << 60)),
    "17 dimensions": edit(lambda m: mx(m).update(shape=[1] * 17)),
    "element count overflows": edit(lambda m: mx(m).update(shape=[1 << 40] * 8)),
    "negative dimension": edit(lambda m: mx(m)["shape"].__setitem__(0, -4)),
    "fractional dimension": edit(lambda m: mx(m)["shape"].__setitem__(0, 1.5)),
    "shape is a string": edit(lambda m: mx(m).update(shape="4x256x256")),
    "unknown layout": edit(lambda m: mx(m)["layout"].update(kind="swizzled")),
    "tile_n 0": edit(lambda m: mx(m)["layout"].update(tile_n=0)),
    "tile_k not a multiple of the block": edit(lambda m: mx(m)["layout"].update(tile_k=48)),
    "padding disagrees with the tile": edit(lambda m: mx(m)["layout"].update(padded_n=4096)),
    "a component missing": edit(lambda m: mx(m)["components"].pop(1)),
    "components swapped": edit(lambda m: mx(m)["components"].reverse()),
    "component bytes wrong": edit(lambda m: mx(m)["components"][0].update(bytes=12)),
    "offset not aligned": edit(lambda m: mx(m)["components"][0].update(offset=mx(m)["components"][0]["offset"] + 1)),
    "offset past the data": edit(lambda m: mx(m)["components"][0].update(offset=1 << 50)),
    "components overlap": edit(lambda m: mx(m)["components"][1].update(offset=mx(m)["components"][0]["offset"])),
    "tensors overlap": edit(lambda m: m["tensors"][1]["components"][0].update(offset=m["tensors"][0]["components"][0]["offset"])),
    "checksum not hex": edit(lambda m: mx(m)["components"][0].update(xxh3="zzzzzzzzzzzzzzzz")),
    "embedded file encoding unknown": edit(lambda m: m["files"][0].update(encoding="lz4")),
    "source not an object": edit(lambda m: mx(m).update(source=[1])),
    "source tensors not a list": edit(lambda m: mx(m).update(source={"tensors": 3})),
    "source part shape a string": edit(lambda m: mx(m)["source"]["tensors"][0].update(shape="big")),
    "source part role unknown": edit(lambda m: mx(m)["source"]["tensors"][0].update(role="weights")),
    "embedded file past the data": edit(lambda m: m["files"][0].update(offset=1 << 50)),
    "embedded file raw size huge": edit(lambda m: m["files"][0].update(raw_bytes=1 << 62)),
}


nf4 = lambda m: first(m, "nf4")  # noqa: E731

# The schema rules the C++ reader checks too (issue 24 item 12): (fixture, edit, what the message says).
SAME_SCHEMA = {
    "tensor name holds a NUL": ("gptoss-mxfp4", edit(lambda m: mx(m).update(name="experts\u0000a")),
                                "tensor 'experts\\x00a': name contains a NUL character"),
    "tensor name holds a lone surrogate": ("gptoss-mxfp4", edit(lambda m: mx(m).update(name="experts\ud800")),
                                           "tensor 'experts\\ud800': name is not valid UTF-8"),
    "embedded file name holds a NUL": ("gptoss-mxfp4", edit(lambda m: m["files"][0].update(name="config\u0000.json")),
                                       "embedded file 'config\\x00.json': name contains a NUL character"),
    "embedded file name holds a lone surrogate": ("gptoss-mxfp4", edit(lambda m: m["files"][0].update(name="config\udfff")),
                                                  "embedded file 'config\\udfff': name is not valid UTF-8"),
    **{f"embedded file named {name!r}": ("gptoss-mxfp4", edit(lambda m, name=name: m["files"][0].update(name=name)),
                                         f"embedded file '{name}': not a plain file name")
       for name in ("../../x", "/abs", "sub/dir", "..", ".", "", "dir\\file")},
    "format_version disagrees with the preamble": ("gptoss-mxfp4", edit(lambda m: m.update(format_version=[2, 1])),
                                                   "manifest: format_version [2, 1] disagrees with the preamble's 2.0"),
    "format_version missing": ("gptoss-mxfp4", edit(lambda m: m.pop("format_version")), "manifest: 'format_version' is missing"),
    "format_version of booleans": ("gptoss-mxfp4", edit(lambda m: m.update(format_version=[True, False])),
                                   "manifest: 'format_version' is not [major, minor]"),
    "model_type is not a string": ("gptoss-mxfp4", edit(lambda m: m.update(model_type=7)), "manifest: 'model_type' is not a string"),
    "nested_offset 1e308": ("llama-nf4-dq", edit(lambda m: nf4(m)["params"].update(nested_offset=1e308)),
                            "nested_offset 1e+308 is not a finite FP32 value"),
    "nested_offset an integer beyond any float": ("llama-nf4-dq", edit(lambda m: nf4(m)["params"].update(nested_offset=10 ** 400)),
                                                  "is not a finite FP32 value"),
    "nested_offset 1e999 (infinity to Python's parser)": ("llama-nf4-dq", lambda b: with_manifest(b, json.dumps(manifest_of(b)).replace(
        f'"nested_offset": {nf4(manifest_of(b))["params"]["nested_offset"]!r}', '"nested_offset": 1e999', 1)),
        "nested_offset inf is not a finite FP32 value"),
    "nested_offset NaN (not JSON)": ("llama-nf4-dq", lambda b: with_manifest(b, json.dumps(
        {**manifest_of(b), "tensors": [dict(t, params={**t["params"], "nested_offset": float("nan")}) if t["format"] == "nf4" else t
                                       for t in manifest_of(b)["tensors"]]})), "NaN is not a JSON value"),
    "component bytes a float": ("gptoss-mxfp4", edit(lambda m: mx(m)["components"][1].update(bytes=float(mx(m)["components"][1]["bytes"]))),
                                "component 'scales': listed as"),
    "component shape of booleans": ("gptoss-mxfp4", edit(lambda m: m["tensors"].append(
        dict(m["tensors"][0], name="flag", dtype="bool", format="bool", shape=[1],
             components=[dict(m["tensors"][0]["components"][0], dtype="bool", shape=[True], bytes=1)]))),
        "component 'data': listed as"),
}


@pytest.mark.parametrize("case", list(SAME_SCHEMA))
def test_schema_rules_shared_with_the_cpp_reader(converted, tmp_path, case):
    fixture, make, message = SAME_SCHEMA[case]
    bad = tmp_path / "bad.iris"
    bad.write_bytes(make(converted(fixture).read_bytes()))
    with pytest.raises(iris.IrisError) as e:
        iris.open(bad)
    assert str(e.value).startswith(f"{bad}: ") and message in str(e.value), str(e.value)
    assert "\n" not in str(e.value) and "\x00" not in str(e.value)
    str(e.value).encode("utf-8")  # printable: no lone surrogate reaches the message


@pytest.mark.parametrize("case", list(CATALOGUE))
def test_malformed_archive_is_refused_naming_the_file(converted, tmp_path, case):
    good = converted("gptoss-mxfp4").read_bytes()
    rebuilt = tmp_path / "rebuilt.iris"
    rebuilt.write_bytes(with_manifest(good, json.dumps(manifest_of(good))))
    iris.open(rebuilt).verify()  # the rebuild itself is a valid archive
    bad = tmp_path / "bad.iris"
    bad.write_bytes(CATALOGUE[case](good))
    with pytest.raises(iris.IrisError) as e:
        iris.open(bad)
    assert str(bad) in str(e.value)
    assert "\n" not in str(e.value)


def test_fifo_and_folder_are_refused_without_waiting(tmp_path):
    import os

    fifo = tmp_path / "pipe.iris"
    os.mkfifo(fifo)
    with pytest.raises(iris.IrisError, match="not a regular file"):
        iris.open(fifo)
    with pytest.raises(iris.IrisError):
        iris.open(tmp_path)


def test_damaged_tensor_data_is_caught_by_verify(converted, tmp_path):
    path = converted("llama-nf4-dq")
    a = iris.open(path)
    t = a.tensors["model.layers.1.mlp.up_proj.weight"]
    absmax = next(c for c in t._components if c[0] == "absmax")
    b = bytearray(path.read_bytes())
    b[a._data_offset + absmax[3] + absmax[4] // 2] ^= 0x20
    bad = tmp_path / "damaged.iris"
    bad.write_bytes(bytes(b))
    damaged = iris.open(bad)
    with pytest.raises(iris.CorruptError, match="up_proj.weight.*absmax"):
        damaged.verify()
    damaged.tensors["model.layers.1.mlp.up_proj.weight"].dequantize("float32", backend="numpy")  # still a status, not a crash


def test_flipped_padding_is_caught_by_verify(converted, tmp_path):
    """A bit flipped in the padding between two components (inside no component, so no
    checksum covers it) fails Archive.verify(), as it fails `iris verify`."""
    path = converted("llama-bf16")
    a = iris.open(path)
    spans = sorted((c[3], c[3] + c[4]) for t in a.tensors.values() for c in t._components)
    gap = next(end for (b0, end), (b1, _) in zip(spans, spans[1:]) if b1 > end)
    b = bytearray(path.read_bytes())
    b[a._data_offset + gap] ^= 0x01
    bad = tmp_path / "padding.iris"
    bad.write_bytes(bytes(b))
    a.verify()  # the original is clean
    with pytest.raises(iris.CorruptError, match="padding must be zero"):
        iris.open(bad).verify()


@pytest.mark.parametrize("fixture", ["gptoss-mxfp4", "llama-nf4-dq", "llama-fp8-block"])
def test_random_damage_raises_only_iris_errors(converted, tmp_path, fixture):
    good = converted(fixture).read_bytes()
    (m_size,) = struct.unpack_from("<Q", good, 24)
    rng = random.Random(20261123)
    bad = tmp_path / "fuzz.iris"
    for trial in range(60):
        b = bytearray(good)
        if trial % 10 == 9:
            b = b[: rng.randrange(len(b))]
        else:
            at = rng.randrange(64 + m_size) if trial % 3 else rng.randrange(len(b))
            b[at] ^= 1 << rng.randrange(8)
        bad.write_bytes(bytes(b))
        try:
            a = iris.open(bad)
        except iris.IrisError:
            continue
        try:
            a.verify()
        except iris.CorruptError:
            pass
        for t in a.tensors.values():
            if t.quantized:
                t.dequantize("bfloat16", backend="numpy")


# Brackets the depth check must not count (inside strings, behind escaped quotes) and a nesting
# of exactly the limit: each archive opens.
WITHIN_THE_DEPTH_LIMIT = {
    "brackets inside a string": lambda m: m["tool"].update(note="[" * 1000 + "{" * 1000),
    "escaped quotes before brackets": lambda m: m["tool"].update(note='\\"' + "[" * 100 + '\\\\"' + "{" * 100 + '\\\\\\"'),
    "nested to the limit": lambda m: m["provenance"].update(deep=json.loads("[" * 62 + "]" * 62)),
}


@pytest.mark.parametrize("case", list(WITHIN_THE_DEPTH_LIMIT))
def test_manifest_within_the_depth_limit_opens(converted, tmp_path, case):
    good = converted("gptoss-mxfp4").read_bytes()
    path = tmp_path / "ok.iris"
    path.write_bytes(edit(WITHIN_THE_DEPTH_LIMIT[case])(good))
    assert len(iris.open(path).tensors) == len(iris.open(converted("gptoss-mxfp4")).tensors)
    if case == "nested to the limit":  # one level more is refused
        path.write_bytes(edit(lambda m: m["provenance"].update(deep=json.loads("[" * 63 + "]" * 63)))(good))
        with pytest.raises(iris.IrisError, match="nested deeper than 64"):
            iris.open(path)
