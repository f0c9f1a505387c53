"""Whether this machine's NCCL works the ways iris.models' tensor-parallel decode uses it, one
stage at a time, each with its time (a stage that hangs is the last one printed):

    python3 bench/nccl_graph_probe.py [WORLD]

one process per GPU; an all_reduce eagerly, an all_gather_into_tensor, both captured in a CUDA
graph and replayed, and both inside a torch.compile(fullgraph=True) function, eager and then
captured. Every result is checked against the sum / concatenation it must be. Then what an
exchange costs a decode step: 72 all_reduces of one FP32 row captured in a graph and replayed
(microseconds a call), and the same through PyTorch's symmetric memory (one-shot and two-shot,
each checked once). Graphs are released before destroy_process_group, which otherwise hangs
(pytorch/pytorch#115388). NVLink multicast stays off, as the GPU machines require.
Measured: docs/device-runs/2026-11-29-tp-decode-nccl-2xh200.txt."""

import datetime
import faulthandler
import os
import sys
import time

for var, value in (("NCCL_NVLS_ENABLE", "0"), ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"), ("NVSHMEM_DISABLE_NVLS", "1")):
    os.environ[var] = value

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from decode_bench import graph_ms  # the same graph timer (this script runs from bench/'s folder on sys.path)

STARTED = time.perf_counter()
CALLS, REPLAYS = 72, 20  # gpt-oss-120b's two exchanges a layer over 36 layers


def say(rank, what):
    print(f"[rank {rank} {time.perf_counter() - STARTED:6.1f} s] {what}", file=sys.stderr, flush=True)


def exchange(x, world):
    y = x.clone()
    dist.all_reduce(y)
    g = torch.empty(world * x.numel(), dtype=x.dtype, device=x.device)
    dist.all_gather_into_tensor(g, x)
    return y, g


def check(rank, world, what, y, g, x):
    want_sum = sum(torch.full_like(x, r + 1) for r in range(world))
    want_cat = torch.cat([torch.full_like(x, r + 1) for r in range(world)])
    ok = torch.equal(y, want_sum) and torch.equal(g, want_cat)
    say(rank, f"{what}: {'OK' if ok else 'WRONG'}")
    if not ok:
        raise SystemExit(1)


def timed_graph(rank, what, body):
    """body() CALLS times captured in one graph, replayed REPLAYS times (decode_bench's timer):
    microseconds a call."""
    say(rank, f"{what} in a graph: {graph_ms(body, reps=REPLAYS, inner=CALLS) * 1000:.2f} us each")


def symmetric_memory_latency(rank, world, dev):
    """The same exchange through PyTorch's symmetric memory (peer loads over NVLink, no NCCL):
    one_shot_all_reduce (every rank reads every rank's buffer) and two_shot_all_reduce_, each
    checked once eagerly, then timed as above. A failure is reported and skipped: this is the
    measurement behind choosing it, not a requirement."""
    try:
        import torch.distributed._symmetric_memory as symm_mem

        name = dist.group.WORLD.group_name
        for n in (2880, 4096):
            buf = symm_mem.empty(n, device=dev, dtype=torch.float32)
            symm_mem.rendezvous(buf, name)
            row = torch.full((n,), float(rank + 1), device=dev)
            buf.copy_(row)
            y = torch.ops.symm_mem.one_shot_all_reduce(buf, "sum", name)
            want = float(sum(r + 1 for r in range(world)))
            say(rank, f"symm_mem one_shot_all_reduce [{n}]: {'OK' if bool((y == want).all()) else 'WRONG'}")

            def one_shot():
                buf.copy_(row)
                return torch.ops.symm_mem.one_shot_all_reduce(buf, "sum", name)

            timed_graph(rank, f"symm_mem copy + one_shot_all_reduce [{n}] FP32", one_shot)

            def two_shot():
                buf.copy_(row)
                torch.ops.symm_mem.two_shot_all_reduce_(buf, "sum", name)

            timed_graph(rank, f"symm_mem copy + two_shot_all_reduce_ [{n}] FP32", two_shot)
    except Exception as e:  # noqa: BLE001 - a probe: say what failed and go on
        say(rank, f"symmetric memory: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")


def worker(rank, world, port):
    faulthandler.dump_traceback_later(50, exit=True)  # a hang shows where, then ends (before the session's 60 s)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dev = torch.device("cuda", rank)
    torch.cuda.set_device(dev)
    dist.init_process_group("nccl", rank=rank, world_size=world, timeout=datetime.timedelta(seconds=120), device_id=dev)
    say(rank, "process group up")
    x = torch.full((4096,), float(rank + 1), device=dev)
    check(rank, world, "eager", *exchange(x, world), x)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        exchange(x, world)
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = exchange(x, world)
    say(rank, "captured")
    graph.replay()
    torch.cuda.synchronize()
    check(rank, world, "graph replay", *out, x)
    compiled = torch.compile(lambda t: exchange(t, world), fullgraph=True, dynamic=False)
    check(rank, world, "compiled, eager", *compiled(x), x)
    graph2 = torch.cuda.CUDAGraph()
    with torch.cuda.stream(s):
        compiled(x)
    torch.cuda.current_stream().wait_stream(s)
    with torch.cuda.graph(graph2):
        out2 = compiled(x)
    graph2.replay()
    torch.cuda.synchronize()
    check(rank, world, "compiled, graph replay", *out2, x)
    # The latency a decode step pays per exchange: CALLS all_reduces of one [1, n] FP32 row (a
    # layer's o or down partials) captured in one graph, replayed; the graph's time / CALLS.
    for n in (2880, 4096, 8192):
        row = torch.ones(1, n, device=dev)
        timed_graph(rank, f"all_reduce of [1, {n}] FP32", lambda: dist.all_reduce(row))
    symmetric_memory_latency(rank, world, dev)
    # Graphs that captured NCCL calls first (destroy_process_group hangs while one lives:
    # pytorch/pytorch#115388).
    del graph, graph2, out, out2
    torch.cuda.synchronize()
    say(rank, "graphs released")
    dist.barrier()
    say(rank, "barrier passed")
    dist.destroy_process_group()
    say(rank, "process group destroyed")


if __name__ == "__main__":
    world = int(sys.argv[1]) if len(sys.argv) > 1 else torch.cuda.device_count()
    mp.spawn(worker, args=(world, 29400 + os.getpid() % 500), nprocs=world)
