"""A whole tensor-parallel decode from rank archives, one process per GPU over NCCL, against the
same model decoded whole on one GPU.

    iris shard model.iris --tp 2 -o ranks/              # or: iris convert SRC --tp 2 -o ranks/
    python3 examples/tensor_parallel/tp_decode.py model.iris ranks/ 2 [--steps 64] [--json out.json]
    python3 examples/tensor_parallel/tp_decode.py model.iris ranks/ 2 --backend gloo   # on one GPU

Each process loads its rank's archive into iris.models (iris.models.load(ranks, rank=,
world_size=): its boxes only), and every rank decodes the same prompt greedily, each step one
CUDA graph with the ranks' exchanges inside it (models/_parallel.py: FP32 partial sums of the
column-split projections all-reduced before their rounding, the vocabulary's logits
gathered). Then rank 0 decodes the whole archive on its GPU alone and compares the tokens.
The ranks' sums differ from one GPU's only in the order of their FP32 additions, so the
tokens may part where the top two logits of a step nearly tie; the first step where they
part is printed, with both tokens and the whole model's top two logits there. Both models
then score the whole model's tokens (teacher forcing): on how many steps the ranks' pick is
the whole model's, and the largest logit difference relative to the step's largest logit.
The same two figures for the whole model against itself in iris.models' other arithmetic
(the other of compiled and uncompiled: noise_floor_*) say how far two correct runs of one
model part. And for the first token, every projection's output after the exchange (o, down, expert down:
first_step_projections, in layer order) against the whole model's: [elements that differ,
largest difference, largest magnitude]. A wrong head, slice or exchange shows in layer 0;
FP32 order shows as one-ulp differences that spread with depth (and, in an MoE, as a router
that picks another expert once they have grown enough).

With --backend gloo the ranks may share one GPU (NCCL refuses two ranks on one device) and
exchange through the host, so the steps run eagerly, not as graphs: the same arithmetic,
checked where only one GPU is at hand; its ms/token mean nothing.

--exact-sums runs both sides with every dot product in an order-free arithmetic (each product
exact in FP64, cut to int64 limbs, summed as integers, rounded once; weights dequantized to
FP32): then the ranks' tokens and logits are one GPU's bit for bit, whatever the split. A
checking mode, not yet timed (it makes some 72 bytes of temporaries a weight read).

--exchange symmetric sums the ranks' partials through NVLink buffers (PyTorch's symmetric
memory, iris.models' exchange="symmetric") instead of NCCL's all_reduce: measured alone on two
H200s, 7.4 us an exchange in a graph against NCCL's 18-26 us (bench/nccl_graph_probe.py).

--knock-out-reductions (timing only) then loads each rank again with its all_reduce of partial
sums (o, down, expert down: two a layer) replaced by nothing, each rank keeping its own partial
sums, and times those steps too (tp_ms_per_token_without_reductions): what the exchanges cost
inside the step's graph, where bench/nccl_graph_probe.py times them back to back. The embedding
row's, the logits' and expert parallelism's row exchanges stay. Its tokens mean nothing.

Each rank prints a line per stage on stderr (seconds since the start), so a run of minutes
shows where it is; `pkill -USR1 -f tp_decode` makes each rank print its Python stack
(this process passes the signal on to them).

Prints one JSON object (and writes it to --json): the tokens of both runs, whether they are
equal, ms/token of both (graph replays, batch 1), each rank's load time and weight bytes read
per token. Exits 1 when the tokens differ. NVLink multicast stays off (NCCL_NVLS_ENABLE=0),
as the GPU machines this was run on require.
"""

import argparse
import datetime
import faulthandler
import gc
import json
import os
import signal
import sys
import time

# SIGUSR1 prints this process's Python stack. Set before torch's import, which takes seconds:
# the ranks run this module's top too (the spawn start method imports it), so a signal at
# any time after their start shows where they are rather than ending them; main() replaces
# it in the parent by passing the signal on to the ranks.
faulthandler.register(signal.SIGUSR1, all_threads=True)

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

for var, value in (("NCCL_NVLS_ENABLE", "0"), ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"), ("NVSHMEM_DISABLE_NVLS", "1")):
    os.environ[var] = value



def ms_per_token(decoder, steps: int, graph: bool) -> float:
    """Steps (graph replays with graph=True), timed over `steps` of them after 4 warm-up ones."""
    decoder.reset()
    decoder.token.fill_(1)
    for _ in range(4):
        decoder.step(graph=graph)
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(steps):
        decoder.step(graph=graph)
    b.record()
    torch.cuda.synchronize()
    return a.elapsed_time(b) / steps


def traced_first_step(decoder, token: int, experts: bool) -> list:
    """One eager step at position 0, recording every projection's output after the ranks'
    exchange (Decoder._project: o, down; with experts, _project_experts: expert down), in call
    order. Expert parallelism exchanges the expert rows later, so its runs leave them out."""
    seen = []
    project, project_experts = decoder._project, decoder._project_experts

    def record(y):
        seen.append(y.clone())
        return y

    decoder._project = lambda part, x: record(project(part, x))
    if experts:
        decoder._project_experts = lambda stack, x, ids, rows: record(project_experts(stack, x, ids, rows))
    try:
        decoder.reset()
        decoder.token.fill_(token)
        decoder.step(graph=False)
    finally:
        decoder.__dict__.pop("_project", None)
        decoder.__dict__.pop("_project_experts", None)
    return seen


def compare_traces(tp: list, whole: list) -> list:
    """Per projection: [elements that differ, largest difference, largest magnitude]."""
    out = []
    for a, b in zip(tp, whole):
        d = (a.float() - b.float()).abs()
        out.append([int((a != b).sum()), round(float(d.max()), 6), round(float(b.float().abs().max()), 4)])
    return out


def out_of_range(decoder):
    """Whether a product left the exact sums' range in this decoder's steps (None: the fast mode)."""
    return None if decoder.exact_out_of_range is None else bool(decoder.exact_out_of_range)


def reductions_knocked_out(args, rank, world, dev, max_len, how, prompt, timed, graph) -> float:
    """ms/token of this rank's steps with its all_reduce of partial sums replaced by nothing
    (timing only). The model is loaded again, so that torch.compile, which traces lazily at the
    first step, takes the knocked-out reduce into the step's graph."""
    import iris_archive.models as models

    m = models.load(args.ranks, device=dev, max_len=max_len, rank=rank, world_size=world, exchange=args.exchange, **how)
    m.tp.reduce = lambda partial: partial  # each rank keeps its own partial sums
    m.generate(prompt, 2, graph=graph)
    ms = ms_per_token(m, timed, graph)
    progress(rank, f"reductions knocked out: {ms:.3f} ms/token (timing only)")
    del m
    gc.collect()
    return ms


def progress(rank: int, what: str) -> None:
    """A line on stderr per stage (rank, seconds since it started): where a multi-minute run is."""
    print(f"[rank {rank} {time.perf_counter() - STARTED:7.1f} s] {what}", file=sys.stderr, flush=True)


STARTED = time.perf_counter()


def worker(rank: int, world: int, args, port: int, results) -> None:
    import iris_archive.models as models

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dev = torch.device("cuda", rank % torch.cuda.device_count())
    torch.cuda.set_device(dev)
    graph = args.backend == "nccl"
    # The other ranks wait while rank 0 loads, runs and scores the whole model twice (minutes at
    # gpt-oss-120b's size); a rank that fails ends the others through torch.multiprocessing.
    options = {"device_id": dev} if args.backend == "nccl" else {}
    dist.init_process_group(args.backend, rank=rank, world_size=world, timeout=datetime.timedelta(seconds=1800), **options)
    progress(rank, f"process group up ({args.backend})")
    prompt = [int(t) for t in args.prompt.split(",")]
    max_len = len(prompt) + args.steps + 8
    t0 = time.perf_counter()
    how = dict(compile=not args.no_compile, dequantize=args.dequantize, nf4_table=args.nf4_table, exact_sums=args.exact_sums)
    m = models.load(args.ranks, device=dev, max_len=max_len, rank=rank, world_size=world, exchange=args.exchange, **how)
    torch.cuda.synchronize()
    load_s = time.perf_counter() - t0
    progress(rank, f"rank archive loaded in {load_s:.1f} s")
    vocab = int(m.config["vocab_size"])
    prompt = [t % vocab for t in prompt]
    tokens = m.generate(prompt, args.steps, graph=graph)
    progress(rank, f"{args.steps} tokens generated")
    timed = min(8 if args.exact_sums else args.steps, max_len - 8)  # exact sums: a checking mode, timed briefly
    tp_ms = ms_per_token(m, timed, graph)
    progress(rank, f"timed: {tp_ms:.3f} ms/token")
    facts = [None] * world  # each rank's (load seconds, bytes a token, exact sums out of range)
    dist.all_gather_object(facts, (load_s, m.bytes_per_token, out_of_range(m)))
    loads, reads, ranges = (list(column) for column in zip(*facts))
    whole, shared = None, [None]
    if rank == 0:
        torch.cuda.empty_cache()  # the rank's freed temporaries back to the device, for the whole model
        whole = models.load(args.whole, device=dev, max_len=max_len, **how)
        whole_bytes = whole.bytes_per_token
        shared = [whole.generate(prompt, args.steps, graph=graph)]
        progress(rank, "the whole archive's tokens generated")
    dist.broadcast_object_list(shared, src=0)
    want = shared[0]
    # Teacher-forced on the whole model's tokens, both give each step's logits: how far apart
    # they are, and on how many steps the tensor-parallel pick is the whole model's, say
    # whether the runs part on a near tie (FP32 order) or on a wrong result.
    tp_logits = m.score(prompt, want, graph=graph)
    experts = m.tp.ep == 1
    tp_trace = traced_first_step(m, prompt[0], experts)
    progress(rank, "scored and traced")
    out = None
    if rank == 0:
        whole_logits = whole.score(prompt, want, graph=graph)
        agree = int((tp_logits.argmax(-1).cpu() == torch.tensor(want)).sum())
        scale = whole_logits.abs().amax(-1)
        worst = float(((tp_logits - whole_logits).abs().amax(-1) / scale).max())
        trace = compare_traces(tp_trace, traced_first_step(whole, prompt[0], experts))
        whole_ms = ms_per_token(whole, timed, graph)
        whole_range = out_of_range(whole)
        progress(rank, f"the whole archive: {whole_ms:.3f} ms/token")
        del whole
        # The comparison's noise floor: the whole model in iris.models' other arithmetic
        # (compiled or not: the other of the two, as bench/decode_bench.py's self-check),
        # scored on the same tokens. Where one GPU's two arithmetics part as often, the ranks'
        # parting says nothing about the split.
        twin_agree = twin_worst = None
        if not args.no_noise_floor:
            twin = models.load(args.whole, device=dev, max_len=max_len, **dict(how, compile=args.no_compile))
            twin_logits = twin.score(prompt, want, graph=graph)
            del twin
            twin_agree = int((twin_logits.argmax(-1).cpu() == torch.tensor(want)).sum())
            twin_worst = float(((twin_logits - whole_logits).abs().amax(-1) / scale).max())
            progress(rank, "noise floor scored")
        part = next((i for i, (a, b) in enumerate(zip(tokens, want)) if a != b), None)
        where = None
        if part is not None:  # the whole model's top two logits at the step where the runs part
            top = torch.topk(whole_logits[part], 2)
            where = {"step": part, "tp_token": tokens[part], "whole_token": want[part],
                     "whole_top2": [[int(i), float(v)] for v, i in zip(top.values.tolist(), top.indices.tolist())]}
        out = {"model": os.path.basename(os.path.normpath(args.whole)), "world": world, "device": torch.cuda.get_device_name(dev),
               "backend": args.backend, "exchange": args.exchange, "mode": "graph" if graph else "eager", "compile": not args.no_compile,
               "dequantize": args.dequantize, "exact_sums": args.exact_sums,
               "exact_out_of_range": None if not args.exact_sums else {"ranks": ranges, "whole": whole_range}, "steps": args.steps, "prompt": prompt,
               "tokens_equal": part is None, "first_difference": where,
               "teacher_forced_picks_equal": agree, "teacher_forced_max_logit_difference": worst,
               "noise_floor_picks_equal": twin_agree, "noise_floor_max_logit_difference": twin_worst,
               "tp_ms_per_token": round(tp_ms, 4), "whole_ms_per_token": round(whole_ms, 4),
               "rank_load_s": [round(s, 3) for s in loads], "rank_bytes_per_token": reads,
               "whole_bytes_per_token": whole_bytes, "tp_tokens": tokens, "whole_tokens": want,
               "first_step_projections": trace}
    if args.knock_out_reductions:
        del m  # the model and its graphs go before the second load
        gc.collect()
        torch.cuda.empty_cache()
        knocked = [None] * world
        dist.all_gather_object(knocked, reductions_knocked_out(args, rank, world, dev, max_len, how, prompt, timed, graph))
        m = None
        if rank == 0:
            out["tp_ms_per_token_without_reductions"] = [round(t, 4) for t in knocked]
    if rank == 0:
        results.append(json.dumps(out))
    # A CUDA graph that captured NCCL calls keeps its communicator busy: destroy_process_group
    # then hangs in ncclCommDestroy (pytorch/pytorch#115388; seen here on two H200s). So the
    # models, and with them their graphs, go first.
    del m
    gc.collect()
    torch.cuda.synchronize()
    dist.barrier()
    dist.destroy_process_group()
    progress(rank, "done")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("whole", help="the whole archive (the single-GPU reference)")
    p.add_argument("ranks", help="its rank archives' folder (iris shard --tp N)")
    p.add_argument("world", type=int, help="ranks: one process and one GPU each")
    p.add_argument("--steps", type=int, default=64)
    p.add_argument("--nf4-table", default="exact", choices=["exact", "bf16"])
    p.add_argument("--prompt", default="1,15,27,8,99,3,42,7", help="token ids, comma-separated (taken modulo the vocabulary)")
    p.add_argument("--no-compile", action="store_true", help="iris.models' uncompiled arithmetic (transformers' steps) on both sides")
    p.add_argument("--dequantize", action="store_true", help="both sides with their weights dequantized to BF16 (the export's model)")
    p.add_argument("--no-noise-floor", action="store_true",
                   help="leave out the whole model's second load in the other arithmetic (minutes at gpt-oss-120b's size)")
    p.add_argument("--exact-sums", action="store_true",
                   help="both sides in the order-free arithmetic (iris.models' exact_sums=True): the ranks' bits are one GPU's")
    p.add_argument("--exchange", default="process-group", choices=["process-group", "symmetric"],
                   help="how the ranks' partial sums travel: the process group's all_reduce, or symmetric memory (NVLink)")
    p.add_argument("--knock-out-reductions", action="store_true",
                   help="timing only: also time each rank with its all_reduce of partial sums replaced by nothing")
    p.add_argument("--json", help="also write the result here")
    p.add_argument("--backend", default="nccl", choices=["nccl", "gloo"],
                   help="gloo: ranks may share a GPU; eager steps (no graphs), for a check on one GPU")
    args = p.parse_args()
    if args.backend == "nccl" and torch.cuda.device_count() < args.world:
        print(f"needs {args.world} GPUs, this machine has {torch.cuda.device_count()}", file=sys.stderr)
        return 77
    results = mp.Manager().list()
    ranks = mp.spawn(worker, args=(args.world, args, 29500 + os.getpid() % 1000, results), nprocs=args.world, join=False)

    def to_ranks(signum, frame):  # the ranks' command lines do not name this script: pass it on
        for p in ranks.processes:
            if p.is_alive():
                os.kill(p.pid, signum)

    signal.signal(signal.SIGUSR1, to_ranks)
    while not ranks.join():
        pass
    out = json.loads(results[0])
    text = json.dumps(out, indent=1)
    print(text)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            f.write(text + "\n")
    return 0 if out["tokens_equal"] else 1


if __name__ == "__main__":
    sys.exit(main())
