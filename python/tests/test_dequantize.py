"""Dequantization, by libiris (ctypes) and by the numpy decoder written from FORMAT.md: each
against the other, against `iris export --dtype`, and against the reference tools' outputs
(transformers, bitsandbytes, torch) bit for bit."""

import numpy as np
import pytest

import iris_archive as iris
from iris_archive import _native
from conftest import FIXTURES, read_safetensors, run_iris

ARCHIVES = [("gptoss-mxfp4", ()), ("llama-nf4-dq", ()), ("llama-fp8-block", ()), ("llama-bf16", ("--quant", "mxfp4")),
            ("llama-bf16", ("--quant", "nf4")), ("llama-bf16", ("--quant", "fp8-channel")),
            ("llama-bf16", ("--quant", "fp8", "--tile-n", "8", "--tile-k", "64")), ("llama-bf16", ("--quant", "fp8-block"))]
DTYPES = {"float32": "f32", "bfloat16": "bf16", "float16": "f16"}

needs_native = pytest.mark.skipif(_native.library() is None, reason=f"libiris not found: {_native.why_not()}")


@pytest.mark.parametrize("fixture,options", ARCHIVES)
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_numpy_decoder_equals_export(converted, tmp_path, fixture, options, dtype):
    path = converted(fixture, *options)
    st = tmp_path / "out.safetensors"
    run_iris("export", path, "-o", st, "--dtype", DTYPES[dtype], "-q")
    exported = read_safetensors(st)
    a = iris.open(path)
    checked = 0
    for name, t in a.tensors.items():
        if not t.quantized and t.dtype not in ("bf16", "f16", "f32", "f64"):
            continue
        got = t.dequantize(dtype, backend="numpy")
        assert got.tobytes() == exported[name].tobytes(), f"{name} as {dtype}"
        checked += t.quantized
    assert checked > 0


@needs_native
@pytest.mark.parametrize("fixture,options", ARCHIVES)
def test_libiris_equals_numpy_decoder(converted, fixture, options):
    a = iris.open(converted(fixture, *options))
    for name, t in a.tensors.items():
        if not t.quantized:
            continue
        for dtype in DTYPES:
            native = t.dequantize(dtype, backend="native")
            assert native.dtype == (iris.bfloat16() if dtype == "bfloat16" else np.dtype(dtype))
            assert native.shape == t.shape
            assert native.tobytes() == t.dequantize(dtype, backend="numpy").tobytes(), f"{name} as {dtype}"


@pytest.mark.parametrize("backend", ["numpy", pytest.param("native", marks=needs_native)])
def test_reference_tools_outputs_bit_for_bit(converted, backend):
    mx = iris.open(converted("gptoss-mxfp4"))
    ref = read_safetensors(FIXTURES / "refs" / "gptoss-mxfp4.dequant.transformers.safetensors")
    n = 0
    for name, want in ref.items():
        if want.ndim != 3:
            continue
        got = mx.tensors[name].dequantize("bfloat16", backend=backend)
        assert np.array_equal(got.view(np.uint16), want.transpose(0, 2, 1)), name  # transformers holds [E, K, N]
        n += 1
    nf4 = iris.open(converted("llama-nf4-dq"))
    for name, want in read_safetensors(FIXTURES / "refs" / "llama-nf4-dq.dequant.bnb.safetensors").items():
        assert np.array_equal(nf4.tensors[name].dequantize("bfloat16", backend=backend).view(np.uint16), want), name
        n += 1
    fp8 = iris.open(converted("llama-fp8-block"))
    for name, want in read_safetensors(FIXTURES / "refs" / "llama-fp8-block.dequant.torch.safetensors").items():
        assert fp8.tensors[name].dequantize("float32", backend=backend).tobytes() == want.tobytes(), name
        n += 1
    assert n == 4 + 14 + 14


def test_bad_arguments(converted):
    t = iris.open(converted("llama-nf4-dq")).tensors["model.layers.0.mlp.up_proj.weight"]
    with pytest.raises(iris.IrisError, match="dtype"):
        t.dequantize("int8")
    with pytest.raises(iris.IrisError, match="backend"):
        t.dequantize("float32", backend="cuda")
