"""get_slice and Tensor.dequantize_rows: a tensor read in parts, as tensor-parallel loaders
read their shard. Values against `iris export --dtype bf16` indexed by numpy; that a leading
slice reads only the tile stripes of its rows, shown by taking every other page of the codes
away from the process (a read of one would end it); the layouts the fixtures lack (flat
bitsandbytes codes, FP8 group and tensor scales, stacks whose N is no multiple of tile_n)
through libiris's iris_dequantize_rows and the numpy decoder, each against the other; and
indices that are wrong."""

import numpy as np
import pytest

import iris_archive as iris
from iris_archive import _native
from conftest import read_safetensors, run_iris
from synthetic_archive import random_quantized_tensors, write_archive

ARCHIVES = [("gptoss-mxfp4", ()), ("llama-nf4-dq", ()), ("llama-fp8-block", ()), ("llama-bf16", ()),
            ("llama-bf16", ("--quant", "mxfp4")), ("llama-bf16", ("--quant", "fp8-channel")),
            ("llama-bf16", ("--quant", "fp8", "--tile-n", "8", "--tile-k", "64"))]
BACKENDS = ["numpy", pytest.param("native", marks=pytest.mark.skipif(_native.library() is None,
                                                                       reason=f"libiris not found: {_native.why_not()}"))]


def keys_for(shape):
    """Indices a loader uses, for a tensor of `shape`: leading slices crossing tile stripes,
    2-D blocks, single rows, steps either way, empty ranges, the ellipsis (every bound within
    [-size, size], as get_slice requires)."""
    if not shape:
        return [(), Ellipsis]

    def s(d, *bounds):
        return slice(*(None if b is None else max(-d, min(d, b)) for b in bounds))

    d0 = shape[0]
    keys = [slice(None), s(d0, d0 // 4, d0 // 2 + 3), s(d0, None, 1), s(d0, -5, None), 0, -1, d0 // 3,
            slice(None, None, 3), slice(None, None, -2), s(d0, d0 - 2, 1, -3), s(d0, 3, 3), s(d0, 5, 2), Ellipsis,
            (Ellipsis, s(shape[-1], 1, 4)), (), slice(-d0, d0)]
    if len(shape) >= 2:
        d1 = shape[1]
        keys += [(s(d0, 1, d0 // 2), s(d1, d1 // 3, d1 - 1)), (slice(None), s(d1, 0, d1 // 2)), (min(2, d0 - 1), slice(None, None, 5)),
                 (s(d0, d0 // 2, None), -1), (-1, -1)]
    if len(shape) >= 3:
        keys += [(1, s(shape[1], 2, 9)), (s(d0, 0, 2), min(5, shape[1] - 1), s(shape[2], None, 7)), (Ellipsis, 3),
                 (s(d0, 1, 3), Ellipsis, s(shape[-1], 8, 16))]
    return keys


def same(got, want, what):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape}, want {want.shape}"
    assert np.ascontiguousarray(got).tobytes() == np.ascontiguousarray(want).tobytes(), what


@pytest.mark.parametrize("fixture,options", ARCHIVES)
def test_slices_equal_the_export(converted, tmp_path, fixture, options):
    path = converted(fixture, *options)
    st = tmp_path / "bf16.safetensors"
    run_iris("export", path, "-o", st, "--dtype", "bf16", "-q")
    exported = read_safetensors(st)  # BF16 as uint16 bits, indexed here by numpy
    a = iris.open(path)
    for name in a.keys():
        sl = a.get_slice(name)
        want = exported[name]
        for key in keys_for(want.shape):
            got = sl[key]
            same(got.view(np.uint16) if got.dtype == iris.bfloat16() else got, want[key], f"{name}[{key}]")


@pytest.mark.parametrize("fixture,options", ARCHIVES[:3])
def test_tensor_parallel_shards_make_the_whole(converted, fixture, options):
    """Rank r of 4 takes rows (or columns) [r * n / 4, (r + 1) * n / 4): the shards, joined,
    are get_tensor's array."""
    a = iris.open(converted(fixture, *options))
    for name in a.keys():
        full, sl = a.get_tensor(name), a.get_slice(name)
        for dim in range(min(2, full.ndim)):
            n = full.shape[dim]
            cuts = [n * r // 4 for r in range(5)]
            parts = [sl[(slice(None),) * dim + (slice(cuts[r], cuts[r + 1]),)] for r in range(4)]
            same(np.concatenate(parts, axis=dim), full, f"{name} split along {dim}")


def test_slice_metadata(converted):
    a = iris.open(converted("gptoss-mxfp4"))
    sl = a.get_slice("model.layers.0.mlp.experts.down_proj")
    full = a.get_tensor("model.layers.0.mlp.experts.down_proj")
    assert sl.shape == full.shape == (4, 256, 256) and sl.get_shape() == [4, 256, 256]
    assert sl.ndim == 3 and len(sl) == 4
    assert sl.dtype == full.dtype == iris.bfloat16() and sl.get_dtype() == "bf16"
    norm = a.get_slice("model.norm.weight")
    assert norm.dtype == a.get_tensor("model.norm.weight").dtype and norm.get_shape() == [256]
    assert "down_proj" in repr(sl)


# Run in a child: it takes pages of the archive's mappings away (mprotect PROT_NONE), so a
# read of any of them ends the child with SIGSEGV. argv: archive, tensor, backend, "rows" r0 r1
# (Tensor.dequantize_rows) or "slice" i0 i1 (get_slice(name)[i0:i1], which takes libiris where
# it is found, else the numpy decoder).
_PAGES_TAKEN_AWAY = """
import ctypes, os, sys
import iris_archive as iris

path, name, backend, how, i0, i1 = sys.argv[1:4] + [sys.argv[4], int(sys.argv[5]), int(sys.argv[6])]
a = iris.open(path)
t = a.tensors[name]
per = t.shape[1] if how == "slice" and len(t.shape) == 3 else 1  # rows of one leading index
r0, r1 = i0 * per, i1 * per
if how == "slice":
    assert (backend == "native") == (not iris.native_library().startswith("none")), "get_slice takes another decoder"
    want = a.get_tensor(name)[i0:i1]
else:
    want = t.dequantize("float32", backend="numpy").reshape(-1, t.shape[-1])[r0:r1]
if backend == "native":
    t.dequantize_rows(0, 1, backend="native")  # libiris maps the file now, before pages go

role, _, _, offset, nbytes, _ = t._components[0]
g = t._geometry
stripe = g["tile_n"] * g["padded_k"] * g["bits"] // 8
per_matrix = g["padded_n"] * g["padded_k"] * g["bits"] // 8
assert role == "codes" and stripe % 4096 == 0 and offset % 4096 == 0
keep = {m * per_matrix + i // g["tile_n"] * stripe for m, i in (divmod(r, g["n"]) for r in range(r0, r1))}  # FORMAT.md 5
codes_at = a._data_offset + offset  # file offset of the codes
mappings = [(a._buf.ctypes.data, 0)]  # (address, file offset): Python's mapping of the whole file
if backend == "native":
    for line in open("/proc/self/maps"):
        f = line.split()
        if len(f) >= 6 and f[5] == os.path.realpath(path) and int(f[0].split("-")[0], 16) != mappings[0][0]:
            mappings.append((int(f[0].split("-")[0], 16), int(f[2], 16)))
    assert len(mappings) > 1, "libiris's mapping of the archive not found"
libc = ctypes.CDLL(None, use_errno=True)
taken = 0
for at in range(0, nbytes, stripe):
    if at not in keep:
        for base, map_offset in mappings:
            if map_offset <= codes_at + at:
                assert libc.mprotect(ctypes.c_void_p(base + codes_at + at - map_offset), ctypes.c_size_t(stripe), 0) == 0
        taken += 1
got = a.get_slice(name)[i0:i1] if how == "slice" else t.dequantize_rows(r0, r1, "float32", backend=backend)
assert got.shape == want.shape and got.tobytes() == want.tobytes(), "values differ"
print(taken, len(keep), nbytes // stripe)
"""


@pytest.fixture(scope="module")
def wide(tmp_path_factory):
    from synthetic_archive import wide_tensors

    path = tmp_path_factory.mktemp("wide") / "wide.iris"
    write_archive(path, wide_tensors(), model_type="llama")
    return path


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("how,name,i0,i1", [("rows", "mxfp4", 32, 48), ("rows", "mxfp4", 35, 40), ("rows", "mxfp4", 30, 50),
                                            ("rows", "nf4", 250, 256), ("rows", "fp8", 0, 16), ("rows", "mxfp4.stack", 100, 140),
                                            ("slice", "mxfp4", 17, 31), ("slice", "nf4", 100, 120), ("slice", "fp8", 64, 80),
                                            ("slice", "mxfp4.stack", 1, 2), ("slice", "mxfp4.stack", 2, 4)])
def test_a_leading_slice_reads_only_its_stripes(wide, backend, how, name, i0, i1):
    """Every page of the codes outside the tile stripes of the rows asked for made unreadable
    in every mapping of the archive: the rows still decode, to the values the whole tensor has
    there. A decoder that read any other stripe would die of SIGSEGV."""
    import os
    import subprocess
    import sys

    env = dict(os.environ)
    if backend == "numpy":
        env["IRIS_LIBRARY"] = "/nonexistent/libiris.so.1"  # so that get_slice takes the numpy decoder
    r = subprocess.run([sys.executable, "-c", _PAGES_TAKEN_AWAY, str(wide), name, backend, how, str(i0), str(i1)],
                       capture_output=True, text=True, env=env)
    assert r.returncode == 0, f"{how} {name}[{i0}:{i1}] ({backend}): exit {r.returncode}\n{r.stderr}"
    taken, kept, total = map(int, r.stdout.split())
    assert taken == total - kept and 0 < kept <= total // 2 and total >= 16


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    path = tmp_path_factory.mktemp("synthetic") / "layouts.iris"
    write_archive(path, random_quantized_tensors(), model_type="llama")
    return path


def _row_ranges(rows, per):
    """Row ranges crossing bytes, blocks, stripes and matrices, and the edges."""
    cuts = {(0, rows), (0, 1), (rows - 1, rows), (1, rows - 1), (rows // 3, 2 * rows // 3 + 1), (0, 0), (rows, rows)}
    if per < rows:
        cuts |= {(per - 1, per + 2), (per, 2 * per)}
    return sorted((a, b) for a, b in cuts if 0 <= a <= b <= rows)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_rows_of_every_layout_agree_across_decoders(synthetic, dtype):
    a = iris.open(synthetic)
    a.verify()
    native = _native.library() is not None
    for name, t in a.tensors.items():
        full = t.dequantize(dtype, backend="numpy")
        k = t.shape[-1]
        rows = full.size // k
        flat = full.reshape(rows, k)
        if native:
            same(t.dequantize(dtype, backend="native"), full, f"{name}: whole tensor, libiris")
        per = rows // t.shape[0] if len(t.shape) >= 2 else rows
        for r0, r1 in _row_ranges(rows, per):
            same(t.dequantize_rows(r0, r1, dtype, backend="numpy"), flat[r0:r1], f"{name} rows {r0}..{r1} numpy")
            if native:
                same(t.dequantize_rows(r0, r1, dtype, backend="native"), flat[r0:r1], f"{name} rows {r0}..{r1} libiris")


def test_slices_of_every_layout(synthetic):
    a = iris.open(synthetic)
    for name in a.keys():
        full, sl = a.get_tensor(name), a.get_slice(name)
        assert sl.dtype == full.dtype
        for key in keys_for(full.shape):
            same(sl[key], full[key], f"{name}[{key}]")


@pytest.mark.parametrize("name", ["model.layers.0.mlp.up_proj.weight", "model.embed_tokens.weight", "model.norm.weight"])
def test_bad_indices(converted, name):
    a = iris.open(converted("llama-nf4-dq"))
    sl = a.get_slice(name)
    d0 = sl.shape[0]
    sl[0:d0], sl[-d0:], sl[d0:]  # the whole dimension, from either end, and the empty end: fine
    for key in [slice(0, d0 + 1), slice(-d0 - 1, None), slice(d0 + 5, None), slice(None, -d0 - 1)]:
        with pytest.raises(IndexError, match=f"{name}.*outside dimension 0 of size {d0}"):
            sl[key]
    for key in [d0, -d0 - 1, 10**20]:
        with pytest.raises(IndexError, match=f"index {key} is out of range for dimension 0 of size {d0}"):
            sl[key]
    with pytest.raises(IndexError, match="indices for a tensor of"):
        sl[(0,) * (sl.ndim + 1)]
    with pytest.raises(IndexError, match="single ellipsis"):
        sl[..., ...]
    if sl.ndim == 2:
        with pytest.raises(IndexError, match="outside dimension 1"):
            sl[0:2, 0 : sl.shape[1] + 1]
    for key in [1.5, "0", [0, 1], np.array([0, 1]), True, slice(0.5, 2), None]:
        with pytest.raises(TypeError, match="indices must be"):
            sl[key]
    with pytest.raises(ValueError, match="step cannot be zero"):
        sl[::0]
    sl[np.int64(1) : np.int32(3)]  # numpy integers are integers


def test_dequantize_rows_bounds(converted):
    t = iris.open(converted("llama-nf4-dq")).tensors["model.layers.0.mlp.up_proj.weight"]
    assert t.dequantize_rows(0, 0).shape == (0, 256) and t.dequantize_rows(512, 512).shape == (0, 256)
    for r0, r1 in [(-1, 2), (5, 3), (0, 513), (513, 514)]:
        with pytest.raises(IndexError, match=r"rows \[.*\) are not within its 512 rows"):
            t.dequantize_rows(r0, r1)
    with pytest.raises(TypeError):
        t.dequantize_rows(0.5, 2)
    with pytest.raises(iris.IrisError, match="dtype"):
        t.dequantize_rows(0, 1, "int8")
