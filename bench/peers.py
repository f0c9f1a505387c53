#!/usr/bin/env python3
"""Peer timings for `iris bench --peers`, measured on the same GPU in the same run.

  python3 bench/peers.py > peers.json

- cuBLAS BF16 through torch.nn.functional.linear, y = x @ W.T, for the GEMV cases (the same
  N x K and batch as iris's fused dequant-GEMV, but reading 16-bit weights).
- bitsandbytes dequantize_4bit / matmul_4bit (NF4, double quant), when `import bitsandbytes`
  works (it is built from its public source on the GPU machine; nothing of it is in this repo).
- the MoE expert GEMV of one token routed to 4 experts of a gpt-oss-20b stack (32 x 5760 x
  2880 and 32 x 2880 x 2880): torch dequantizing the 4 selected experts to BF16 (table lookups
  and scale multiplies on the GPU) and then `bmm`, for MXFP4, NF4 and FP8; and bitsandbytes'
  matmul_4bit on each selected NF4 expert, when bitsandbytes is there.
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


E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0]
NF4 = [-1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453, -0.28444138169288635, -0.18477343022823334,
       -0.09105003625154495, 0.0, 0.07958029955625534, 0.16093020141124725, 0.24611230194568634, 0.33791524171829224,
       0.44070982933044434, 0.5626170039176941, 0.7229568362236023, 1.0]


def expert_peers(results):
    """torch dequant-then-bmm of the 4 selected experts (ids 0, E/4, E/2, 3E/4, as iris bench)."""
    table_e2m1 = torch.tensor(E2M1, device="cuda", dtype=torch.float32)
    table_nf4 = torch.tensor(NF4, device="cuda", dtype=torch.float32)
    for e, n, k in ((32, 5760, 2880), (32, 2880, 2880)):
        ids = torch.tensor([0, e // 4, e // 2, 3 * e // 4], device="cuda")
        r = rotations(e * n * k // 2)
        xs = [torch.randn(1, k, device="cuda", dtype=torch.bfloat16) for _ in range(r)]

        def unpack(codes, table):  # [4, n, k/2] bytes -> [4, n, k] values (low nibble first)
            return torch.stack((table[(codes & 15).long()], table[(codes >> 4).long()]), dim=-1).reshape(codes.shape[0], n, k)

        mx = [(torch.randint(0, 256, (e, n, k // 2), device="cuda", dtype=torch.uint8),
               torch.randint(118, 130, (e, n, k // 32), device="cuda", dtype=torch.uint8)) for _ in range(r)]

        def mxfp4(c, sc, x):
            w = unpack(c[ids], table_e2m1) * torch.exp2(sc[ids].float() - 127).repeat_interleave(32, dim=-1)
            return torch.bmm(w.to(torch.bfloat16), x.t().expand(4, k, 1))
        us = time_graph([lambda c=c, x=x: mxfp4(c[0], c[1], x) for c, x in zip(mx, xs)])
        results.append({"kernel": "gemv_experts", "case": f"mxfp4 {e}x{n}x{k} top-4", "batch": 4, "peer": "torch dequant+bmm", "us": us})
        del mx
        nf = [(torch.randint(0, 256, (e, n, k // 2), device="cuda", dtype=torch.uint8),
               torch.rand(e, n, k // 64, device="cuda", dtype=torch.float32)) for _ in range(r)]

        def nf4(c, am, x):
            w = unpack(c[ids], table_nf4) * am[ids].repeat_interleave(64, dim=-1)
            return torch.bmm(w.to(torch.bfloat16), x.t().expand(4, k, 1))
        us = time_graph([lambda c=c, x=x: nf4(c[0], c[1], x) for c, x in zip(nf, xs)])
        results.append({"kernel": "gemv_experts", "case": f"nf4 {e}x{n}x{k} top-4", "batch": 4, "peer": "torch dequant+bmm", "us": us})
        del nf
        r8 = rotations(e * n * k)
        f8 = [(torch.randint(0, 256, (e, n, k), device="cuda", dtype=torch.uint8) & 0xF7,  # no NaN codes
               torch.rand(e, n, 1, device="cuda", dtype=torch.float32)) for _ in range(r8)]
        xs8 = [xs[i % len(xs)] for i in range(r8)]

        def fp8(c, sc, x):
            w = c[ids].view(torch.float8_e4m3fn).to(torch.float32) * sc[ids]
            return torch.bmm(w.to(torch.bfloat16), x.t().expand(4, k, 1))
        us = time_graph([lambda c=c, x=x: fp8(c[0], c[1], x) for c, x in zip(f8, xs8)])
        results.append({"kernel": "gemv_experts", "case": f"fp8 {e}x{n}x{k} top-4", "batch": 4, "peer": "torch dequant+bmm", "us": us})
        del f8
        try:
            import bitsandbytes as bnb  # noqa: E402
            import bitsandbytes.functional as F  # noqa: E402

            w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16) * 0.02
            rb = rotations(4 * n * k // 2)
            packs = [[F.quantize_4bit(w, quant_type="nf4", compress_statistics=True) for _ in range(4)] for _ in range(rb)]
            xb = [xs[i % len(xs)] for i in range(rb)]
            fns = [lambda ps=ps, x=x: [bnb.matmul_4bit(x, p[0].t(), quant_state=p[1]) for p in ps] for ps, x in zip(packs, xb)]
            us = time_graph(fns)
            results.append({"kernel": "gemv_experts", "case": f"nf4 {e}x{n}x{k} top-4", "batch": 4, "peer": "bitsandbytes (4 calls)", "us": us})
        except ImportError:
            pass
        except Exception as ex:  # graph capture unsupported for this path
            print(f"bitsandbytes experts: {ex}", file=sys.stderr)


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
    expert_peers(results)
    print(json.dumps({"device": torch.cuda.get_device_name(0), "copy_gbps": copy_gbps(), "results": results}, indent=1))


if __name__ == "__main__":
    main()
