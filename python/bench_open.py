"""How long iris.open() takes on a big manifest (issue 24 item 5: 36,096 tensors, the
expert-tensor count of Qwen3-235B-A22B, should open in under a second on a 2-core machine).

    python3 python/bench_open.py [--tensors 36096] [--repeat 5] [ARCHIVE]

Without ARCHIVE it writes a synthetic MoE archive (python/tests/synthetic_archive.py: small
MXFP4 expert weights with zero data, a sparse file) to a temporary folder first. Prints the
manifest size, then the wall and CPU seconds of each open, and the best and median. Needs
numpy and xxhash; run it from the repository root (or with python/ on PYTHONPATH)."""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(HERE, "tests")]

import iris_archive as iris  # noqa: E402
import synthetic_archive  # noqa: E402


def time_opens(path: str, repeat: int) -> list:
    walls = []
    for _ in range(repeat):
        wall, cpu = time.perf_counter(), time.process_time()
        archive = iris.open(path)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        print(f"  open: {wall:.3f} s wall, {cpu:.3f} s CPU, {len(archive.tensors)} tensors")
        archive.close()
        del archive
        walls.append(wall)
    return walls


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("archive", nargs="?")
    ap.add_argument("--tensors", type=int, default=36096)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = args.archive
        if path is None:
            path = os.path.join(tmp, "moe.iris")
            synthetic_archive.write_expert_archive(path, args.tensors)
        with open(path, "rb") as f:
            f.seek(24)
            manifest_bytes = int.from_bytes(f.read(8), "little")
        print(f"{path}: manifest of {manifest_bytes / 2**20:.1f} MiB")
        walls = time_opens(path, args.repeat)
        print(f"best {min(walls):.3f} s, median {statistics.median(walls):.3f} s over {len(walls)} opens")


if __name__ == "__main__":
    main()
