"""Tensor-parallel layers from rank archives, one process per GPU over NCCL.

    iris shard model.iris --tp 2 -o ranks/              # or: iris convert SRC --tp 2 -o ranks/
    python3 examples/tensor_parallel/tp_layers.py model.iris ranks/ 2

Each process loads its rank's archive (iris.torch.load(ranks, rank=r, world_size=W): only
its boxes reach its GPU) and runs every quantized [N, K] weight on one random BF16 row x, the
same on every rank, through iris's fused GEMV:
- a weight split by rows (q, k, v, gate, up, lm_head) gives the rows of y its box holds; the
  ranks' slices are gathered (all_gather). Each row is the same dot product as the whole
  GEMV's, but not always summed in the same order: the GEMV gives a stripe of rows as many
  warps as keep every stripe resident in one wave (kernels/gemv_mma.cu), so a box with fewer
  rows may get more warps, each taking other chunks of K. So the rows must be within the
  bound below of the whole GEMV's, and the count of weights whose rows are bit-identical is
  printed. Replicated boxes (key/value heads when there are more ranks than heads) must agree
  with each other bit for bit (the same bytes through the same launch).
- a weight split by columns (o, down) gives partial sums of its columns' x, each rounded to
  BF16; they are summed in FP32 across the ranks (all_reduce).
- a weight held whole must give the whole GEMV's bits.
The bound, per output: 2^-6 * sum_k |w_k x_k| (w the FP32 dequantized weight): the BF16
rounding of each of the W partials or of a row on each side (2^-8 each: BF16 keeps 8
significant bits; relative to sums no larger than that), plus FP32 accumulation in another
order ((K + 64) 2^-22, verify/gemv_bound.h).
Prints one line per weight on rank 0 with its split, the ranks' load time, and exits 1 on any
mismatch. The whole archive is loaded on every GPU as the reference: a model that fits one GPU.
NVLink multicast stays off (NCCL_NVLS_ENABLE=0), as the GPU machines this was run on require.
"""

import os
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

for var, value in (("NCCL_NVLS_ENABLE", "0"), ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"), ("NVSHMEM_DISABLE_NVLS", "1")):
    os.environ[var] = value


def worker(rank: int, world: int, whole_path: str, ranks_path: str, port: int, failures) -> None:
    import iris_archive as iris
    import iris_archive.torch as itorch

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=world, device_id=torch.device("cuda", rank))
    dev = torch.device("cuda", rank)
    t0 = time.perf_counter()
    part = itorch.load(ranks_path, device=dev, rank=rank, world_size=world)
    torch.cuda.synchronize()
    load_s = time.perf_counter() - t0
    boxes = {e["name"]: e for e in iris.open_rank(ranks_path, rank, world).metadata["rank"]["tensors"]}
    whole = itorch.load(whole_path, device=dev)
    loads = [None] * world
    dist.all_gather_object(loads, load_s)
    bad = identical = checked = 0
    for name in sorted(whole):
        w = whole[name]
        if not isinstance(w, itorch.QuantTensor) or w.dim() != 2:
            continue
        n, k = w.shape
        gen = torch.Generator(device="cpu").manual_seed(abs(hash(name)) % (1 << 31))
        x = torch.randn(1, k, generator=gen).to(torch.bfloat16).to(dev)
        dist.broadcast(x, 0)  # hash() is salted per process: rank 0's x for everyone
        want = w.linear(x)
        e = boxes.get(name)
        # Every rank says how it holds the weight: (held, row start, rows, column start, columns);
        # a rank of another expert group holds none of an expert's weights.
        mine = torch.tensor([1, e["start"][0], e["count"][0], e["start"][1], e["count"][1]] if e else [0, 0, 0, 0, 0], device=dev)
        held = [torch.zeros_like(mine) for _ in range(world)]
        dist.all_gather(held, mine)
        held = [h.tolist()[1:] if h[0] else None for h in held]
        cols_split = any(h is not None and h[3] != k for h in held)
        if not cols_split:  # rows split or whole: each rank's rows, gathered
            y = part[name].linear(x) if e else torch.zeros(1, 0, dtype=torch.bfloat16, device=dev)
            rows = max(h[1] for h in held if h is not None)
            pad = torch.zeros(1, rows, dtype=torch.bfloat16, device=dev)
            pad[:, : y.shape[1]] = y
            got = [torch.zeros_like(pad) for _ in range(world)]
            dist.all_gather(got, pad)
            full = torch.full((1, n), float("nan"), dtype=torch.bfloat16, device=dev)
            ok = True
            for h, g in zip(held, got):
                if h is None:
                    continue
                r0, nr = h[0], h[1]
                seg = g[:, :nr]
                if not torch.isnan(full[:, r0:r0 + nr]).all() and not torch.equal(full[:, r0:r0 + nr].view(torch.int16), seg.view(torch.int16)):
                    ok = False  # a replica that disagrees
                full[:, r0:r0 + nr] = seg
            same = not torch.isnan(full).any() and torch.equal(full.view(torch.int16), want.view(torch.int16))
            how = "whole" if all(h is None or h[1] == n for h in held) else "rows"
            if how == "whole":
                ok = ok and same
            else:
                wf = w.dequantize(torch.float32)
                bound = (wf.abs() @ x.float().abs().T).T * 2.0 ** -6
                ok = ok and not torch.isnan(full).any() and bool(((full.float() - want.float()).abs() <= bound).all())
            identical += same
        else:  # columns split: partial sums, reduced in FP32
            if held[rank] is not None:
                c0, nc = held[rank][2], held[rank][3]
                y = part[name].linear(x[:, c0:c0 + nc]).float()
            else:
                y = torch.zeros(1, n, device=dev)
            dist.all_reduce(y)
            wf = w.dequantize(torch.float32)
            bound = (wf.abs() @ x.float().abs().T).T * 2.0 ** -6
            ok = bool(((y - want.float()).abs() <= bound).all())
            how = "columns"
        bad += not ok
        checked += 1
        if rank == 0:
            print(f"{'ok  ' if ok else 'FAIL'} {name} [{n}, {k}] split by {how}")
    # Every rank checked every weight on the gathered results: the worst rank's count decides.
    total = torch.tensor([bad], device=dev)
    dist.all_reduce(total, op=dist.ReduceOp.MAX)
    if rank == 0:
        print(f"{world} ranks; rank archives loaded in " + ", ".join(f"{s:.3f}" for s in loads) + " s; "
              f"{checked} weights, {identical} of the row-split or whole ones bit-identical to the whole GEMV, "
              f"{int(total.item())} outside the bound")
    failures[rank] = int(total.item())
    dist.destroy_process_group()


def main() -> int:
    if len(sys.argv) != 4:
        print(__doc__)
        return 2
    whole, ranks, world = sys.argv[1], sys.argv[2], int(sys.argv[3])
    if torch.cuda.device_count() < world:
        print(f"needs {world} GPUs, this machine has {torch.cuda.device_count()}")
        return 77
    failures = mp.Manager().list([0] * world)
    mp.spawn(worker, args=(world, whole, ranks, 29500 + os.getpid() % 1000, failures), nprocs=world)
    return 1 if any(failures) else 0


if __name__ == "__main__":
    sys.exit(main())
