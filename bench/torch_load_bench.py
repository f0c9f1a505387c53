"""iris.torch.load of an archive vs safetensors.torch.load_file(..., device="cuda") of the same
weights (the snapshot it was converted from), both from the page cache, same run.

    python3 bench/torch_load_bench.py SNAPSHOT_DIR ARCHIVE [RUNS=5]

Prints one JSON object: median seconds and GB/s of each, and their ratio."""

import glob
import json
import os
import statistics
import sys
import time

import torch

import iris_archive.torch as itorch


def warm(paths):
    for p in paths:
        with open(p, "rb") as f:
            while f.read(64 << 20):
                pass


def main():
    snapshot, archive = sys.argv[1], sys.argv[2]
    runs = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    from safetensors.torch import load_file

    shards = sorted(glob.glob(os.path.join(snapshot, "*.safetensors")))
    warm(shards + [archive])
    nbytes = sum(os.path.getsize(s) for s in shards)
    torch.cuda.init()
    torch.empty(1, device="cuda")  # context created before timing either
    times = {"safetensors": [], "iris": []}
    for _ in range(runs):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        sd = {}
        for s in shards:
            sd.update(load_file(s, device="cuda"))
        torch.cuda.synchronize()
        times["safetensors"].append(time.perf_counter() - t0)
        del sd
        torch.cuda.empty_cache()
        free_before = torch.cuda.mem_get_info()[0]
        t0 = time.perf_counter()
        sd = itorch.load(archive)
        torch.cuda.synchronize()
        times["iris"].append(time.perf_counter() - t0)
        iris_device_bytes = free_before - torch.cuda.mem_get_info()[0]
        del sd
    med = {k: statistics.median(v) for k, v in times.items()}
    print(json.dumps({
        "bytes": nbytes, "runs": runs,
        "safetensors_s": med["safetensors"], "safetensors_gbps": nbytes / med["safetensors"] / 1e9,
        "iris_s": med["iris"], "iris_gbps": nbytes / med["iris"] / 1e9,
        "iris_speedup": med["safetensors"] / med["iris"],
        "iris_device_bytes": iris_device_bytes, "iris_device_bytes_over_tensor_bytes": iris_device_bytes / nbytes,
        "all": times,
    }, indent=2))


if __name__ == "__main__":
    main()
