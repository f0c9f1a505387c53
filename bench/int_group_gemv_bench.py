"""The first int_group GEMV (kernels/int_group.cu) timed against the card's other paths on the
same shape, batch 1: a GPTQ-packed 4-bit group-128 weight (random codes, zero points and
scales, written by python/tests/test_packed_integers.py's packer) converted as stored
(int_group) and requantized to MXFP4, both loaded by iris.torch, and cuBLAS BF16 on the
dequantized weight. Each timing: 200 launches after 20 warm-up ones, the mean of CUDA events,
inputs rotated over 8 copies of each weight so that no weight stays in L2 (8 x 29 MB).

  device run: PYTHONPATH=python IRIS_BINARY=.device-bin/iris IRIS_LIBRARY=.device-bin/libiris.so.1 \
              python3 bench/int_group_gemv_bench.py [N K]
"""

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python" / "tests"))
import test_packed_integers as packed  # noqa: E402
import iris_archive.torch as itorch  # noqa: E402

N, K = (int(sys.argv[1]), int(sys.argv[2])) if len(sys.argv) > 2 else (14336, 4096)
COPIES = 8
IRIS = os.environ["IRIS_BINARY"]


def timed(fn, inputs):
    for i in range(20):
        fn(inputs[i % len(inputs)])
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for i in range(200):
        fn(inputs[i % len(inputs)])
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) * 1000 / 200  # us


with tempfile.TemporaryDirectory() as tmp:
    tmp = Path(tmp)
    tensors, qc, _ = packed.gptq_case(4, 128, True, False, False, n=N, k=K)
    packed.write_snapshot(tmp / "snap", tensors, qc)
    out = {}
    for name, extra in (("int_group", ()), ("mxfp4", ("--quant", "mxfp4"))):
        subprocess.run([IRIS, "convert", str(tmp / "snap"), "-o", str(tmp / f"{name}.iris"), "-q", *extra], check=True)
    x = torch.randn(1, K, device="cuda").to(torch.bfloat16)
    for name in ("int_group", "mxfp4"):
        weights = [itorch.load(tmp / f"{name}.iris")["m.p.weight"] for _ in range(COPIES)]
        out[name + "_us"] = round(timed(lambda w: w.linear(x), weights), 2)
        if name == "int_group":
            w16 = [weights[0].dequantize(torch.bfloat16).clone() for _ in range(COPIES)]
        del weights
    out["cublas_bf16_us"] = round(timed(lambda w: torch.nn.functional.linear(x, w), w16), 2)
    bytes_int4 = N * K // 2 + N * (K // 128) * 3  # codes, F16 scales, U8 zero points
    out.update(shape=f"{N}x{K}", device=torch.cuda.get_device_name(), int_group_bytes=bytes_int4,
               int_group_tb_s=round(bytes_int4 / out["int_group_us"] / 1e6, 3),
               cublas_bf16_tb_s=round(N * K * 2 / out["cublas_bf16_us"] / 1e6, 3))
    print(json.dumps(out))
