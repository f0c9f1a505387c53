"""The safetensors idioms on an archive: keys(), get_tensor(), `in`, iteration, len(), the
context manager and close(), checked against `iris inspect --json` (the names, in order) and
`iris export --dtype bf16` read by the tests' own safetensors reader (the values); and what
opening a path that is no archive raises."""

import errno
import json
import os

import numpy as np
import pytest

import iris_archive as iris
from conftest import FIXTURES, read_safetensors, run_iris

FIXTURE_NAMES = ["gptoss-mxfp4", "llama-bf16", "llama-nf4-dq", "llama-fp8-block"]


@pytest.mark.parametrize("fixture", FIXTURE_NAMES)
def test_keys_and_get_tensor_equal_inspect_and_export(converted, tmp_path, fixture):
    path = converted(fixture)
    names = [t["name"] for t in json.loads(run_iris("inspect", path, "--json").stdout)["tensors"]]
    st = tmp_path / "bf16.safetensors"
    run_iris("export", path, "-o", st, "--dtype", "bf16", "-q")
    exported = read_safetensors(st)
    with iris.open(path) as a:
        assert a.keys() == names and list(a) == names and len(a) == len(names)
        assert all(name in a for name in names) and "model.no_such.weight" not in a
        quantized = 0
        for name in names:
            x = a.get_tensor(name)
            # Every tensor of these fixtures is BF16 or quantized from BF16 (the dtype the
            # archive records), so get_tensor gives BF16 values throughout.
            assert a.tensors[name].dtype == "bf16"
            assert x.dtype == iris.bfloat16() and x.shape == exported[name].shape, name
            assert x.tobytes() == exported[name].tobytes(), name
            quantized += a.tensors[name].quantized
        assert quantized > 0 or fixture == "llama-bf16"


def test_get_tensor_views_and_copies(converted):
    a = iris.open(converted("llama-nf4-dq"))
    raw = a.get_tensor("model.norm.weight")
    assert not raw.flags.writeable and raw.base is not None  # a view of the mapping, as Tensor.numpy()
    q = a.get_tensor("model.layers.0.mlp.up_proj.weight")
    assert q.tobytes() == a.tensors["model.layers.0.mlp.up_proj.weight"].dequantize("bfloat16").tobytes()
    q.view(np.uint16)[0, 0] ^= 1  # dequantized into a new array of the caller's: writable, shared with nothing
    assert q.tobytes() != a.get_tensor("model.layers.0.mlp.up_proj.weight").tobytes()


def test_unknown_names_raise_key_error_naming_them(converted):
    path = converted("llama-bf16")
    a = iris.open(path)
    for call in (a.get_tensor, a.get_slice):
        with pytest.raises(KeyError) as e:
            call("model.layers.9.mlp.up_proj.weight")
        assert "model.layers.9.mlp.up_proj.weight" in str(e.value) and str(path) in str(e.value)
    with pytest.raises(KeyError, match="no tensor named"):
        a.get_tensor(3)


def test_context_manager_and_close(converted):
    path = converted("llama-nf4-dq")
    with iris.open(path) as a:
        assert not a.closed
        kept_raw = a.get_tensor("model.norm.weight")
        want = kept_raw.copy()
        kept_quantized = a.get_tensor("model.layers.0.mlp.up_proj.weight")
        t = a.tensors["model.layers.0.mlp.up_proj.weight"]
        sl = a.get_slice("model.layers.0.mlp.up_proj.weight")
    assert a.closed and a  # a handle: true, as a file object is, closed or not
    # What was returned stays valid: the mapping outlives close() while a view holds it.
    assert np.array_equal(kept_raw.view(np.uint16), want.view(np.uint16)) and kept_quantized.shape == (512, 256)
    for read in (a.keys, lambda: a.get_tensor("model.norm.weight"), lambda: len(a), lambda: "x" in a, lambda: sl[0:16],
                 lambda: t.dequantize(), lambda: t.dequantize_rows(0, 1), lambda: t.components, a.verify):
        with pytest.raises(iris.IrisError, match="closed"):
            read()
    a.close()  # twice is harmless


def test_a_missing_file_is_file_not_found_error(tmp_path):
    missing = tmp_path / "nowhere.iris"
    with pytest.raises(FileNotFoundError) as e:
        iris.open(missing)
    assert isinstance(e.value, iris.IrisError) and isinstance(e.value, iris.ArchiveNotFoundError)
    assert e.value.errno == errno.ENOENT and e.value.filename == str(missing)
    assert str(e.value) == f"{missing}: cannot open: No such file or directory"  # one line, the package's
    with pytest.raises(iris.IrisError, match="not a regular file"):  # a folder is no archive either
        iris.open(tmp_path)


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a file whatever its mode")
def test_an_unreadable_file_is_permission_error(converted, tmp_path):
    p = tmp_path / "locked.iris"
    p.write_bytes(converted("llama-bf16").read_bytes())
    p.chmod(0)
    with pytest.raises(PermissionError) as e:
        iris.open(p)
    assert isinstance(e.value, iris.IrisError) and str(p) in str(e.value)


def test_the_fixtures_reference_values_through_get_tensor(converted):
    """get_tensor of a quantized tensor against what bitsandbytes itself dequantized (the
    fixture's reference file), not against iris's own export."""
    a = iris.open(converted("llama-nf4-dq"))
    ref = read_safetensors(FIXTURES / "refs" / "llama-nf4-dq.dequant.bnb.safetensors")
    assert ref
    for name, want in ref.items():
        assert np.array_equal(a.get_tensor(name).view(np.uint16), want), name


def test_a_sub_byte_tensor_has_no_numpy_array(tmp_path):
    """FP4 kept as the source packed it (FORMAT.md 4.1): no numpy type holds it, so get_tensor
    says so rather than hand out bytes as if they were values."""
    from synthetic_archive import write_archive

    path = tmp_path / "f4.iris"
    packed = bytes(range(12))  # [4, 6] FP4 values, two per byte
    write_archive(path, [{"name": "w.f4", "shape": [4, 6], "dtype": "f4", "format": "f4", "layout": {"kind": "row_major"},
                          "components": [{"role": "data", "dtype": "f4", "shape": [4, 6], "bytes": 12, "data": packed}]}])
    a = iris.open(path)
    a.verify()
    for read in (lambda: a.get_tensor("w.f4"), lambda: a.get_slice("w.f4")[0:2], lambda: a.get_slice("w.f4").dtype):
        with pytest.raises(iris.IrisError, match="w.f4': f4 has no numpy type"):
            read()
    assert a.get_slice("w.f4").shape == (4, 6) and a.get_slice("w.f4").get_dtype() == "f4"
    assert a.tensors["w.f4"].components["data"].tobytes() == packed
