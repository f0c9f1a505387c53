"""iris's dense BF16 GEMV (torch.ops.iris.gemv_bf16, the attention projections of gpt-oss in
iris.models) against cuBLAS (torch.nn.functional.linear) at batch 1, each timed in a CUDA graph
over distinct weights (more bytes than L2 holds, so every launch reads from DRAM), alone: no
producer kernel to wait for. From the repository root on the GPU machine, with the carried
static build (bench/pack_device_bin.sh):

    B=.device-bin; . bench/device_env.sh; IRIS_LIBRARY=$PWD/$B/libiris.so.1 PYTHONPATH=$PWD/python python3 bench/dense_bf16_bench.py

Prints one JSON line a shape: us a launch and GB/s for both, and iris's time over cuBLAS's."""

import argparse
import json

import torch

import iris_archive.torch  # noqa: F401  (registers torch.ops.iris.*)
from decode_bench import graph_ms  # the same graph timer (this script runs from bench/'s folder on sys.path)


def time_graph(fn, weights, replays):
    """us per launch of fn over every weight in turn, captured once and replayed (decode_bench's
    graph timer over one pass of the weights)."""
    return graph_ms(lambda: [fn(w) for w in weights], reps=replays) * 1e3 / len(weights)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="5120x2880,2880x4096,4096x4096,14336x4096,201088x2880")
    ap.add_argument("--bias", action="store_true", help="with a bias, as gpt-oss's projections have")
    ap.add_argument("--replays", type=int, default=20)
    ap.add_argument("--bytes", type=float, default=400e6, help="weight bytes per replay (several times L2)")
    args = ap.parse_args()
    torch.manual_seed(0)
    for shape in args.shapes.split(","):
        n, k = (int(v) for v in shape.split("x"))
        count = max(2, int(args.bytes // (2 * n * k)))
        weights = [torch.randn(n, k, device="cuda", dtype=torch.bfloat16) * 0.02 for _ in range(count)]
        x = torch.randn(1, k, device="cuda", dtype=torch.bfloat16)
        bias = torch.randn(n, device="cuda", dtype=torch.bfloat16) if args.bias else None
        iris_us = time_graph(lambda w: torch.ops.iris.gemv_bf16(x, w, bias), weights, args.replays)
        cublas_us = time_graph(lambda w: torch.nn.functional.linear(x, w, bias), weights, args.replays)
        gb = 2 * n * k / 1e9
        print(json.dumps({"shape": shape, "bias": args.bias, "iris_us": round(iris_us, 2), "cublas_us": round(cublas_us, 2),
                          "iris_GBps": round(gb / iris_us * 1e6), "cublas_GBps": round(gb / cublas_us * 1e6),
                          "iris_over_cublas": round(iris_us / cublas_us, 3), "device": torch.cuda.get_device_name()}), flush=True)
        del weights


if __name__ == "__main__":
    main()
