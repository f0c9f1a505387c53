#!/usr/bin/env python3
"""Peer timings for `iris bench --peers`, measured on the same GPU in the same run.

  python3 bench/peers.py > peers.json

- cuBLAS BF16 through torch.nn.functional.linear, y = x @ W.T, for the GEMV cases (the same
  N x K and batch as iris's fused dequant-GEMV, but reading 16-bit weights).
- bitsandbytes dequantize_4bit / matmul_4bit (NF4, double quant), when `import bitsandbytes`
  works (it is built from its public source on the GPU machine; nothing of it is in this repo).
- the device-to-device copy bandwidth as torch measures it (bytes read + written).

Timing: CUDA graphs replayed over weights rotated past twice the L2, CUDA events, medians.
"""
import json
import sys

import torch

REPLAYS = 50
L2 = torch.cuda.get_device_properties(0).L2_cache_size


def time_graph(fns):
    """Median microseconds per call of a list of zero-argument callables run as one graph."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for f in fns:  # warm up (lazy init, cuBLAS handles) outside the capture
            f()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for f in fns:
            f()
    for _ in range(5):
        g.replay()
    times = []
    for _ in range(REPLAYS):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1000.0 / len(fns))
    times.sort()
    return times[len(times) // 2]


def copy_gbps():
    n = 1 << 30
    src = torch.randint(0, 255, (n,), dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    us = time_graph([lambda: dst.copy_(src)])
    return 2 * n / (us * 1e-6) / 1e9


def rotations(nbytes):
    return max(2, min(16, -(-2 * L2 // nbytes)))


def main():
    results = []
    shapes = [(14336, 4096), (4096, 1024)]
    for n, k in shapes:
        r = rotations(n * k * 2)
        ws = [torch.randn(n, k, device="cuda", dtype=torch.bfloat16) * 0.02 for _ in range(r)]
        for batch in (1, 16):
            xs = [torch.randn(batch, k, device="cuda", dtype=torch.bfloat16) for _ in range(r)]
            us = time_graph([lambda w=w, x=x: torch.nn.functional.linear(x, w) for w, x in zip(ws, xs)])
            for fmt in ("mxfp4", "nf4", "fp8"):
                results.append({"kernel": "gemv", "case": f"{fmt} {n}x{k}", "batch": batch, "peer": "cuBLAS bf16", "us": us})
        del ws
    try:
        import bitsandbytes.functional as F  # noqa: E402

        for n, k in shapes:
            w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16) * 0.02
            r = rotations(n * k // 2)
            packs = [F.quantize_4bit(w, quant_type="nf4", compress_statistics=True) for _ in range(r)]
            outs = [torch.empty(n, k, device="cuda", dtype=torch.bfloat16) for _ in range(r)]
            us = time_graph([lambda p=p, o=o: F.dequantize_4bit(p[0], p[1], out=o) for p, o in zip(packs, outs)])
            results.append({"kernel": "dequant", "case": f"nf4 {n}x{k}", "batch": 0, "peer": "bitsandbytes", "us": us})
            import bitsandbytes as bnb  # noqa: E402

            for batch in (1, 16):
                xs = [torch.randn(batch, k, device="cuda", dtype=torch.bfloat16) for _ in range(r)]
                fns = [lambda p=p, x=x: bnb.matmul_4bit(x, p[0].t(), quant_state=p[1]) for p, x in zip(packs, xs)]
                try:
                    us = time_graph(fns)
                    results.append({"kernel": "gemv", "case": f"nf4 {n}x{k}", "batch": batch, "peer": "bitsandbytes", "us": us})
                except Exception as e:  # graph capture unsupported for this path
                    print(f"bitsandbytes matmul_4bit b={batch}: {e}", file=sys.stderr)
    except ImportError as e:
        print(f"bitsandbytes not available: {e}", file=sys.stderr)
    print(json.dumps({"device": torch.cuda.get_device_name(0), "copy_gbps": copy_gbps(), "results": results}, indent=1))


if __name__ == "__main__":
    main()
