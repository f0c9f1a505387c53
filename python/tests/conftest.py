"""Archives for the tests, made by the real `iris convert` ($IRIS_BINARY, default
build/converter/iris), once per session."""

import json
import os
import struct
import subprocess
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "data" / "fixtures"
IRIS = os.environ.get("IRIS_BINARY", str(ROOT / "build" / "converter" / "iris"))
# The snapshot maker (bench/make_snapshot.cpp): beside a carried iris, else in the build tree.
MAKE_SNAPSHOT = os.environ.get("IRIS_MAKE_SNAPSHOT") or next(
    (str(p) for p in (Path(IRIS).parent / "iris_make_snapshot", ROOT / "build" / "bench" / "iris_make_snapshot") if p.exists()),
    str(ROOT / "build" / "bench" / "iris_make_snapshot"))


def run_iris(*args):
    r = subprocess.run([IRIS, *map(str, args)], capture_output=True, text=True)
    assert r.returncode == 0, f"iris {' '.join(map(str, args))}: {r.stderr}"
    return r


ST_DTYPES = {np.dtype("<i4"): "I32", np.dtype("<f2"): "F16", np.dtype("<f4"): "F32", np.dtype("<i8"): "I64", np.dtype("uint8"): "U8",
             np.dtype("int8"): "I8"}


def write_safetensors(path, tensors):
    """tensors: name -> numpy array, or (array, safetensors dtype) for bit patterns held in
    another numpy type (BF16 as uint16, F8_E4M3 as uint8); in the given order, header padded
    to 8 bytes: a writer written here from the safetensors format."""
    header, blobs, offset = {}, [], 0
    for name, value in tensors.items():
        array, st = value if isinstance(value, tuple) else (value, ST_DTYPES[value.dtype])
        raw = np.ascontiguousarray(array).tobytes()
        header[name] = {"dtype": st, "shape": list(array.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    Path(path).write_bytes(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def write_checkpoint(folder, tensors, config):
    """A checkpoint folder: model.safetensors (write_safetensors' `tensors`) and, unless config is
    None, config.json."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    write_safetensors(folder / "model.safetensors", tensors)
    if config is not None:
        (folder / "config.json").write_text(json.dumps(config))


def convert(snapshot, out, *options):
    """`iris convert SNAPSHOT -o OUT -q OPTIONS`, its CompletedProcess (not asserted)."""
    return subprocess.run([IRIS, "convert", str(snapshot), "-o", str(out), "-q", *map(str, options)], capture_output=True, text=True)


def assert_same_bits(got, want, what):
    """FP32 arrays equal bit for bit, NaN matching any NaN (payloads differ by reader)."""
    same = (got.view(np.uint32) == want.view(np.uint32)) | (np.isnan(got) & np.isnan(want))
    assert same.all(), f"{what}: {np.count_nonzero(~same)} weights differ, first at {np.argwhere(~same)[0]}"


def assert_refused(tmp_path, tensors, config, *needles, options=()):
    """The checkpoint written to tmp_path/bad is refused by convert: non-zero exit, its last
    stderr line holding every needle, and no output left."""
    write_checkpoint(tmp_path / "bad", tensors, config)
    r = convert(tmp_path / "bad", tmp_path / "bad.iris", *options)
    assert r.returncode != 0, "accepted"
    line = r.stderr.strip().splitlines()[-1]
    for n in needles:
        assert n in line, line
    assert not (tmp_path / "bad.iris").exists()


def bf16_round(x32):
    """FP32 -> BF16 nearest even, widened back to FP32 (NaN kept): a tool's final cast to BF16."""
    x32 = np.asarray(x32, dtype=np.float32)
    u = x32.view(np.uint32).astype(np.uint64)
    r = (((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16).astype(np.uint32).view(np.float32)
    return np.where(np.isnan(x32), x32, r)


def tool_fixture(tmp_path, fixture):
    """A producing tool's fixture converted as stored: the archive (the numpy reader's), the
    tool's reference weights (refs/FIXTURE.dequant.TOOL.safetensors) and the checkpoint's own
    tensors (its one model.safetensors)."""
    import iris_archive

    r = convert(FIXTURES / fixture, tmp_path / "a.iris")
    assert r.returncode == 0, r.stderr
    (ref_path,) = (FIXTURES / "refs").glob(fixture + ".dequant.*.safetensors")
    refs = read_safetensors(ref_path)
    assert refs
    return iris_archive.open(tmp_path / "a.iris"), refs, read_safetensors(FIXTURES / fixture / "model.safetensors")


def raw_safetensors(path):
    """name -> (safetensors dtype, shape, bytes) of a safetensors file, or of every one in a folder."""
    files = sorted(Path(path).glob("*.safetensors")) if Path(path).is_dir() else [Path(path)]
    out = {}
    for f in files:
        data = f.read_bytes()
        (n,) = struct.unpack_from("<Q", data, 0)
        for name, h in json.loads(data[8 : 8 + n]).items():
            if name != "__metadata__":
                b, e = h["data_offsets"]
                out[name] = (h["dtype"], h["shape"], data[8 + n + b : 8 + n + e])
    return out


def assert_exports_back(snapshot, tmp_path):
    """`iris convert` of a checkpoint folder, then `iris export` to a folder: every tensor of the
    checkpoint written back byte for byte (names, dtypes, shapes, bytes). Returns the export's
    folder."""
    run_iris("convert", snapshot, "-o", tmp_path / "round-trip.iris", "-q")
    run_iris("export", tmp_path / "round-trip.iris", "-o", str(tmp_path / "exported") + "/", "-q")
    before, after = raw_safetensors(snapshot), raw_safetensors(tmp_path / "exported")
    assert before.keys() == after.keys()
    for name in before:
        assert before[name] == after[name], f"{snapshot}: {name}"
    return tmp_path / "exported"


def read_safetensors(path):
    """name -> numpy array of the raw little-endian values (BF16 as uint16): a reader written
    here from the safetensors format, so tests do not need the safetensors package."""
    data = Path(path).read_bytes()
    (n,) = struct.unpack_from("<Q", data, 0)
    header = json.loads(data[8 : 8 + n])
    types = {"F32": "<f4", "F16": "<f2", "BF16": "<u2", "U8": "u1", "I64": "<i8", "F64": "<f8", "F8_E4M3": "u1", "I32": "<i4", "I8": "i1"}
    out = {}
    for name, h in header.items():
        if name == "__metadata__":
            continue
        begin, end = h["data_offsets"]
        out[name] = np.frombuffer(data, dtype=types[h["dtype"]], count=(end - begin) // np.dtype(types[h["dtype"]]).itemsize,
                                  offset=8 + n + begin).reshape(h["shape"])
    return out


@pytest.fixture(scope="session")
def converted(tmp_path_factory):
    made = {}

    def make(fixture, *options):
        key = (fixture, options)
        if key not in made:
            out = tmp_path_factory.mktemp("archives") / f"{fixture}.iris"
            run_iris("convert", FIXTURES / fixture, "-o", out, "-q", *options)
            made[key] = out
        return made[key]

    return make
