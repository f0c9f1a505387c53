"""dtype arguments as numpy users write them, and the dtype BF16 results come back as:
ml_dtypes.bfloat16 where ml_dtypes is installed, else uint16 holding the bits. The fallback is
tested on every machine (ml_dtypes hidden from a child interpreter); the ml_dtypes path only
where ml_dtypes can be imported."""

import subprocess
import sys
import textwrap

import numpy as np
import pytest

import iris_archive as iris
from conftest import read_safetensors, run_iris

NAME = "model.layers.0.mlp.up_proj.weight"


@pytest.fixture(scope="module")
def tensor(converted):
    return iris.open(converted("llama-nf4-dq")).tensors[NAME]


@pytest.mark.parametrize("given,name", [(np.float32, "float32"), (np.dtype("float32"), "float32"), ("f4", "float32"),
                                        ("<f4", "float32"), ("single", "float32"), (np.float16, "float16"),
                                        (np.dtype("float16"), "float16"), ("half", "float16"), ("e", "float16")])
def test_numpy_dtypes_are_dtype_arguments(tensor, given, name):
    got = tensor.dequantize(given)
    assert got.dtype == np.dtype(name) and got.tobytes() == tensor.dequantize(name).tobytes()
    assert tensor.dequantize_rows(3, 9, given).tobytes() == tensor.dequantize_rows(3, 9, name).tobytes()


@pytest.mark.parametrize("given", [np.float64, "float64", np.uint16, "uint16", "int8", "f16", "bf16", None, object(), 3,
                                   np.dtype([("a", "f4")])])
def test_other_dtypes_are_refused_naming_the_choices(tensor, given):
    # "f16" is numpy's float128, not float16; uint16 would say nothing of the values.
    with pytest.raises(iris.IrisError, match=f"{NAME}.*dtype must be float32, float16 or bfloat16"):
        tensor.dequantize(given)


def test_values_of_numpy_dtype_arguments_equal_the_export(converted, tmp_path):
    path = converted("llama-nf4-dq")
    st = tmp_path / "f16.safetensors"
    run_iris("export", path, "-o", st, "--dtype", "f16", "-q")
    want = read_safetensors(st)[NAME]
    assert np.array_equal(iris.open(path).tensors[NAME].dequantize(np.float16), want)


def _child(code: str, *args) -> list:
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code), *map(str, args)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return r.stdout.split()


def test_without_ml_dtypes_bf16_is_uint16_bits(converted, tmp_path):
    """As where ml_dtypes is not installed (whether or not it is here)."""
    path = converted("llama-nf4-dq")
    out = _child(f"""
        import sys
        sys.modules["ml_dtypes"] = None  # import fails, as where it is not installed
        import numpy as np, iris_archive as iris
        a = iris.open(sys.argv[1])
        t = a.tensors[{NAME!r}]
        print(iris.bfloat16(), t.dequantize("bfloat16").dtype, a.get_tensor({NAME!r}).dtype,
              a.get_tensor("model.norm.weight").dtype, a.get_slice({NAME!r}).dtype, a.get_slice({NAME!r})[0:2].dtype)
        np.save(sys.argv[2], t.dequantize("bfloat16"))
    """, path, tmp_path / "bits.npy")
    assert out == ["uint16"] * 6
    st = tmp_path / "bf16.safetensors"
    run_iris("export", path, "-o", st, "--dtype", "bf16", "-q")
    assert np.array_equal(np.load(tmp_path / "bits.npy"), read_safetensors(st)[NAME])


def test_with_ml_dtypes_bf16_is_its_bfloat16(converted, tmp_path):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    path = converted("llama-nf4-dq")
    a = iris.open(path)
    t = a.tensors[NAME]
    bf16 = np.dtype(ml_dtypes.bfloat16)
    assert iris.bfloat16() == bf16
    x = t.dequantize("bfloat16")
    for got in (x, t.dequantize(ml_dtypes.bfloat16), t.dequantize(bf16), a.get_tensor(NAME), a.get_slice(NAME)[:],
                t.dequantize_rows(0, 512, ml_dtypes.bfloat16).reshape(512, 256)):
        assert got.dtype == bf16 and got.tobytes() == x.tobytes()
    assert a.get_tensor("model.norm.weight").dtype == bf16 and a.get_slice(NAME).dtype == bf16
    # The bits are the export's, and ml_dtypes' own conversion gives the values they hold.
    st = tmp_path / "bf16.safetensors"
    run_iris("export", path, "-o", st, "--dtype", "bf16", "-q")
    bits = read_safetensors(st)[NAME]
    assert np.array_equal(x.view(np.uint16), bits)
    assert np.array_equal(x.astype(np.float32), (bits.astype(np.uint32) << 16).view(np.float32))
