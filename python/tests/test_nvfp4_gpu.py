"""NVFP4 on the GPU through libiris (skipped, saying why, without torch, CUDA or libiris with
CUDA): every ModelOpt and compressed-tensors fixture, converted as stored, and iris's own
--quant nvfp4 of the BF16 Llama, loaded by iris.torch -- the GPU's dequantization equal to the
CPU reader's bit for bit (FP32 and BF16), and its linear (the tensor-core GEMV where the layout
allows, else the CUDA-core one) within the FP32 bound of a float64 reference."""

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device here; these run on the GPU machine (bench/gpu_run.sh)", allow_module_level=True)

from iris_archive import _native  # noqa: E402

if _native.library() is None:
    pytest.skip(f"libiris not found: {_native.why_not()}", allow_module_level=True)

import iris_archive.torch as itorch  # noqa: E402
from gpu_checks import check_archive_on_gpu  # noqa: E402

CASES = [("llama-modelopt-nvfp4", ()), ("llama-ct-nvfp4a16", ()), ("moe-ct-nvfp4a16", ()), ("llama-bf16", ("--quant", "nvfp4"))]


@pytest.mark.parametrize("fixture,options", CASES)
def test_dequantize_and_linear_on_the_gpu(converted, fixture, options):
    # (the kernels apply the tensor scale to the sums: one rounding of each weight apart)
    assert check_archive_on_gpu(torch, itorch, converted(fixture, *options), "nvfp4", rows=(1, 3), weight_roundings=1) >= 7
