"""What one GEMV launch costs the host, eagerly (no CUDA graph): the decode's eager ms/token is
the sum of such costs over ~260 launches a step. For each tiled weight of a small synthetic
archive (python/tests/synthetic_archive.py's wide tensors: [256, 4096] MXFP4, NF4, FP8 block,
so the GPU work is a few microseconds and the host's share shows), the microseconds a call of
  - libiris's C entry point (iris_cuda_gemv through ctypes): the library's own host work, the
    launch's occupancy and attribute queries included, plus ctypes' call;
  - torch.ops.iris.gemv: the same through PyTorch's custom-op dispatch (what a patched model
    pays in eager mode);
  - an empty ctypes call (iris_cuda_experts_count on a null handle) and torch.empty: the floor
    that neither iris nor its launches can remove.
Each is timed over N calls back to back, the stream synchronized at the end; the median of R
rounds is printed. From the repository root on the GPU machine (IRIS_LIBRARY, PYTHONPATH set as
bench/decode_run.sh sets them):
    python3 bench/launch_host_cost.py [--calls 2000] [--rounds 5] [--nf4-table bf16]
Prints one JSON line a case."""

import argparse
import ctypes
import json
import os
import statistics
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python", "tests"))
import synthetic_archive  # noqa: E402

import iris_archive.torch as iris_torch  # noqa: E402


def per_call_us(fn, calls: int, rounds: int) -> float:
    for _ in range(50):
        fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
        out.append((time.perf_counter() - t0) / calls * 1e6)
    return statistics.median(out)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--nf4-table", choices=["exact", "bf16"], default="bf16")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "wide.iris")
        synthetic_archive.write_archive(path, synthetic_archive.wide_tensors(), model_type="llama")
        weights = iris_torch.load(path, nf4_table=a.nf4_table)
        lib = iris_torch._lib()
        msg = ctypes.create_string_buffer(1024)
        stream = torch.cuda.current_stream().cuda_stream
        floor_ctypes = per_call_us(lambda: lib.iris_cuda_experts_count(None), a.calls, a.rounds)
        floor_empty = per_call_us(lambda: torch.empty(1, 256, dtype=torch.bfloat16, device="cuda"), a.calls, a.rounds)
        print(json.dumps({"case": "floor", "ctypes_call_us": round(floor_ctypes, 2), "torch_empty_us": round(floor_empty, 2)}))
        for name, w in weights.items():
            if not isinstance(w, iris_torch.QuantTensor) or len(w.shape) != 2:
                continue
            n, k = w.shape
            x = torch.randn(1, k, device="cuda").to(torch.bfloat16)
            y = torch.empty(1, n, dtype=torch.bfloat16, device="cuda")
            handle = w._handle

            def c_call():
                rc = lib.iris_cuda_gemv(handle, x.data_ptr(), 1, y.data_ptr(), 10, stream, msg, len(msg))
                if rc:
                    raise RuntimeError(msg.value.decode())

            c_us = per_call_us(c_call, a.calls, a.rounds)
            op_us = per_call_us(lambda: torch.ops.iris.gemv(x, handle, n), a.calls, a.rounds)
            print(json.dumps({"case": name, "shape": [n, k], "format": w.format, "c_api_us": round(c_us, 2),
                              "torch_op_us": round(op_us, 2), "device": torch.cuda.get_device_name()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
