"""int_group on the GPU through libiris (skipped, saying why, without torch, CUDA or libiris
with CUDA): every GPTQ / AWQ / compressed-tensors / bitsandbytes LLM.int8 fixture, converted as stored, loaded by
iris.torch -- its dequantization equal to the CPU reader's bit for bit, its linear within the
FP32 bound of a float64 reference -- and an archive whose permutation is not one refused by the
upload before any kernel indexes by it."""

import ctypes
import json
import subprocess

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device here; these run on the GPU machine (bench/gpu_run.sh)", allow_module_level=True)

import iris_archive as iris  # noqa: E402
from iris_archive import _native  # noqa: E402

if _native.library() is None:
    pytest.skip(f"libiris not found: {_native.why_not()}", allow_module_level=True)

import iris_archive.torch as itorch  # noqa: E402
from conftest import IRIS  # noqa: E402
import test_packed_integers as packed  # noqa: E402
from gpu_checks import check_archive_on_gpu  # noqa: E402

TOOL_FIXTURES = packed.TOOL_FIXTURES + ["llama-bnb-int8", "moe-bnb-int8"]  # (LLM.int8: int_group with its post factor)


@pytest.mark.parametrize("fixture", TOOL_FIXTURES)
def test_dequantize_and_linear_on_the_gpu(converted, fixture):
    assert check_archive_on_gpu(torch, itorch, converted(fixture), "int_group") > 0


def test_a_permutation_that_is_not_one_is_refused_at_upload(tmp_path):
    tensors, qc, _ = packed.gptq_case(4, 64, True, False, True)
    packed.write_snapshot(tmp_path / "snap", tensors, qc)
    assert packed.convert(tmp_path / "snap", tmp_path / "a.iris").returncode == 0
    inspected = json.loads(subprocess.run([IRIS, "inspect", str(tmp_path / "a.iris"), "--json"], capture_output=True, text=True,
                                          check=True).stdout)
    (perm,) = [c for t in inspected["tensors"] if t["name"] == "m.p.weight" for c in t["components"] if c["role"] == "permutation"]
    data = bytearray((tmp_path / "a.iris").read_bytes())
    data[perm["offset"] + 4 : perm["offset"] + 8] = data[perm["offset"] : perm["offset"] + 4]
    (tmp_path / "bad.iris").write_bytes(bytes(data))
    # Uploaded without hashing (the changed bytes would fail their checksum first), the tensor
    # has no kernel view: dequantizing it fails, naming the permutation.
    lib = _native.library()
    archive = iris.open(tmp_path / "bad.iris")
    opts = itorch._UploadOptions()
    lib.iris_upload_options_init(ctypes.byref(opts))
    opts.device = torch.cuda.current_device()
    opts.verify = 0
    msg = ctypes.create_string_buffer(1024)
    dev = ctypes.c_void_p()
    assert lib.iris_cuda_upload(_native.handle(archive), ctypes.byref(opts), ctypes.byref(dev), msg, len(msg)) == 0, msg.value
    try:
        t = ctypes.c_void_p()
        assert lib.iris_cuda_archive_find_tensor(dev, b"m.p.weight", ctypes.byref(t), msg, len(msg)) == 0, msg.value
        out = torch.empty(64 * 256, dtype=torch.float32, device="cuda")
        code = lib.iris_cuda_dequantize(t, 11,  # IRIS_DTYPE_F32
                                        ctypes.c_void_p(out.data_ptr()), ctypes.c_size_t(out.numel() * 4), None, msg, len(msg))
        assert code != 0
        assert b"permutation" in msg.value, msg.value
    finally:
        lib.iris_cuda_archive_free(dev)
