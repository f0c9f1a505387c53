"""Whole-model decode from .iris archives, batch 1, each step one CUDA graph (issue 25).

    python3 bench/decode_bench.py --iris BIN --make-snapshot BIN --work DIR --out RESULT.json
        [--models llama-3-8b,gpt-oss-20b] [--formats mxfp4,nf4,fp8-block,fp8-channel]
        [--layers N] [--steps 64]

Each model is bench/models/NAME.json (a real model's config.json), given random weights by
`iris_make_snapshot --config` (RMSNorm weights 1, gpt-oss experts in MXFP4 as shipped) and
converted by `iris convert` (gpt-oss: as it is; dense families: --quant per format). --layers
keeps the first N layers (a model too large for the disk). For each model and format:

- ms/token of iris.models' decoder, eager and replaying one CUDA graph per step; tokens/s;
- weight bytes read per token, and that as a share of the card's copy ceiling (a device copy
  kernel, read + write) and of cuBLAS BF16's achieved GEMV bandwidth, both measured here;
- the BF16 peer: the same decoder holding the dequantized weights (bit for bit what `iris
  export --dtype bf16` writes) on cuBLAS, under the same graph;
- the per-step timeline: each kernel's microseconds per step and share of the step, from the
  profiler over graph replays, grouped into iris GEMV / iris decode ops / cuBLAS / other;
- the greedy-token check: --steps tokens after an 8-token prompt, against the BF16 peer's.
  and its noise floor: the same BF16 weights in iris.models' other arithmetic against the
  peer (--no-self-check skips it);
- with --exact-check, the greedy check again with both models in iris.models' order-free
  arithmetic (exact_sums=True: every dot product exact, rounded once), where no summation
  order is left to part them: the tokens are then equal wherever the two hold the same weights
  (MXFP4, whose values BF16 holds exactly), and a parting says the weights differ (NF4 and FP8,
  whose FP32 values the BF16 export rounds; the exact sums take NF4's exact table, so
  --nf4-table bf16 does not apply to them). A checking mode: eager, the weights dequantized to
  FP32 on the card but MXFP4 expert stacks, whose picked experts each call dequantizes (the
  model's FP32 weights must fit it);
- with --knock-out-sweep (Llama-family models), the graph step timed again without each kind
  of non-GEMV step and without all: what each costs on the critical path, which the
  timeline's durations overlap under programmatic launches (timing only).

Prints one JSON document (also written to --out) and a table on stderr."""

import argparse
import gc
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "python"))

import iris_archive as iris  # noqa: E402
import iris_archive.models  # noqa: F401,E402 - iris.models

PROMPT = [1, 15, 27, 8, 99, 3, 42, 7]


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def graph_ms(fn, reps: int = 20, inner: int = 1) -> float:
    """Median-free simple timing of a captured fn: CUDA events over reps replays."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn()
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(inner):
            fn()
    g.replay()
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(reps):
        g.replay()
    b.record()
    torch.cuda.synchronize()
    return a.elapsed_time(b) / (reps * inner)


def ceilings() -> dict:
    """The card's copy ceiling (a 1 GiB device-to-device copy, read + write counted) and cuBLAS
    BF16's achieved GEMV bandwidth at batch 1 (8 distinct weights, so L2 holds none)."""
    src = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    copy_ms = graph_ms(lambda: dst.copy_(src), reps=20)
    del src, dst
    out = {"copy_GBps": 2 * (1 << 30) / copy_ms / 1e6}
    for n, k in ((14336, 4096), (4096, 14336)):
        ws = [torch.randn(n, k, device="cuda", dtype=torch.bfloat16) for _ in range(8)]
        x = torch.randn(1, k, device="cuda", dtype=torch.bfloat16)

        def run():
            for w in ws:
                F.linear(x, w)

        ms = graph_ms(run, reps=20) / len(ws)
        out[f"cublas_bf16_gemv_{n}x{k}_us"] = ms * 1e3
        out[f"cublas_bf16_gemv_{n}x{k}_GBps"] = n * k * 2 / ms / 1e6
        del ws
    out["cublas_bf16_GBps"] = (out["cublas_bf16_gemv_14336x4096_GBps"] + out["cublas_bf16_gemv_4096x14336_GBps"]) / 2
    torch.cuda.empty_cache()
    return out


def time_decoder(decoder, steps: int) -> dict:
    torch.cuda.synchronize()
    decoder.generate(PROMPT, 2, graph=False)  # warm-up: kernels loaded, cuBLAS heuristics
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(8):
        decoder.step(graph=False)
    torch.cuda.synchronize()
    eager = (time.perf_counter() - t0) / 8 * 1e3
    decoder.capture()
    decoder.reset()
    for _ in range(4):
        decoder.step(graph=True)
    torch.cuda.synchronize()
    n = min(steps, decoder.max_len - 8)
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(n):
        decoder.step(graph=True)
    b.record()
    torch.cuda.synchronize()
    return {"eager_ms": eager, "graph_ms": a.elapsed_time(b) / n}


def timeline(decoder, replays: int = 5) -> dict:
    """Kernel times per step from the profiler over graph replays (CUPTI reports the kernels a
    graph launches); falls back to eager steps if it reports none."""
    from torch.profiler import ProfilerActivity, profile

    def collect(graph):
        decoder.reset()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(replays):
                decoder.step(graph=graph)
            torch.cuda.synchronize()
        rows = []
        for e in prof.key_averages():
            us = getattr(e, "device_time_total", None)
            if us is None:
                us = getattr(e, "cuda_time_total", 0)
            if us > 0 and e.count > 0 and getattr(e, "device_type", None) is not None and str(e.device_type).endswith("CUDA"):
                rows.append((e.key, e.count / replays, us / replays))
        return rows

    rows, source = collect(True), "graph replays"
    if not rows:
        rows, source = collect(False), "eager steps (the profiler saw no kernels in graph replays)"
    total = sum(r[2] for r in rows) or 1.0

    def kind(name):
        n = name.lower()
        if "iris" in n and any(s in n for s in ("gemv", "mma_kernel", "stripe_kernel", "row_kernel")):
            return "iris GEMV"
        if "iris" in n:  # the router, attention, residual_norm (before run v48 these counted as GEMVs)
            return "iris decode ops"
        if any(s in n for s in ("gemv", "gemm", "cutlass", "cublas", "xmma", "sm90")):
            return "cuBLAS"
        return "other"

    rows.sort(key=lambda r: -r[2])
    groups = {}
    for name, count, us in rows:
        g = groups.setdefault(kind(name), {"kernels_per_step": 0.0, "us_per_step": 0.0})
        g["kernels_per_step"] += count
        g["us_per_step"] += us
    for g in groups.values():
        g["share"] = g["us_per_step"] / total
    return {"source": source, "kernel_us_per_step": total, "kernels_per_step": sum(r[1] for r in rows), "groups": groups,
            "top": [{"kernel": name[:120], "per_step": count, "us": us, "share": us / total} for name, count, us in rows[:15]]}


def write_config(args, name: str, work: Path) -> tuple:
    """bench/models/NAME.json, cut to --layers, written into the work folder: (config, its path)."""
    config = json.loads((HERE / "models" / f"{name}.json").read_text())
    if args.layers:
        config["num_hidden_layers"] = min(args.layers, config["num_hidden_layers"])
        if "layer_types" in config:
            config["layer_types"] = config["layer_types"][:config["num_hidden_layers"]]
    path = work / f"{name}.config.json"
    path.write_text(json.dumps(config))
    return config, path


def make_model(args, name: str, work: Path) -> tuple:
    config, cfg_path = write_config(args, name, work)
    snap = work / f"{name}-snapshot"
    t0 = time.time()
    subprocess.run([args.make_snapshot, str(snap), "--config", str(cfg_path)], check=True, stdout=sys.stderr)
    log(f"{name}: snapshot in {time.time() - t0:.1f} s")
    return config, snap


def make_archive_direct(args, name: str, work: Path, fmt: str) -> tuple:
    """The model's archive written straight from its config (iris_make_snapshot --archive): gpt-oss
    as shipped, the dense families in fmt (mxfp4 or nf4, random codes); no snapshot on disk."""
    config, cfg_path = write_config(args, name, work)
    out = work / f"{name}-{fmt}.iris"
    cmd = [args.make_snapshot, str(out), "--config", str(cfg_path), "--archive"] + ([] if fmt == "as-shipped" else ["--quant", fmt])
    t0 = time.time()
    subprocess.run(cmd, check=True, stdout=sys.stderr)
    log(f"{name} {fmt}: archive written directly in {time.time() - t0:.1f} s, {out.stat().st_size / 1e9:.2f} GB")
    return config, out


def convert(args, snap: Path, out: Path, fmt: str) -> float:
    """fmt: a --quant format; FMT+head also quantizes lm_head (iris keeps it by default);
    as-shipped converts the checkpoint as it is."""
    cmd = [args.iris, "convert", str(snap), "-o", str(out), "-q", "--force"]
    if fmt != "as-shipped":
        base = fmt.removesuffix("+head")
        cmd += ["--quant", base] + (["--rule", rf"^lm_head\.weight$={base}"] if fmt.endswith("+head") else [])
    t0 = time.time()
    subprocess.run(cmd, check=True)
    return time.time() - t0


def greedy_check(ref_logits, q_logits, ref_tokens, q_tokens) -> dict:
    """Free-running: the first step where the two greedy sequences part. Teacher-forced on the
    BF16 peer's sequence: where the quantized model's pick differs, and whether each such step
    is a near-tie (the peer's top-two margin within the two models' logit difference there)."""
    first = next((i for i, (a, b) in enumerate(zip(q_tokens, ref_tokens)) if a != b), None)
    top2 = ref_logits.topk(2, dim=-1).values
    margin = (top2[:, 0] - top2[:, 1])
    diff = (q_logits - ref_logits).abs().amax(dim=-1)
    differ = (q_logits.argmax(-1) != ref_logits.argmax(-1)).nonzero().flatten().tolist()
    return {"steps": len(ref_tokens), "free_running_equal": first is None, "free_running_first_difference": first,
            "teacher_forced_agree": len(ref_tokens) - len(differ), "teacher_forced_differ_at": differ,
            "differ_margins": [float(margin[i]) for i in differ], "differ_logit_diffs": [float(diff[i]) for i in differ],
            "all_differences_near_ties": all(float(margin[i]) <= 2 * float(diff[i]) for i in differ),
            "max_logit_diff": float(diff.max()), "median_ref_margin": float(margin.median()),
            "max_abs_logit": float(ref_logits.abs().max()), "tokens": q_tokens[:16], "bf16_tokens": ref_tokens[:16]}


def release():
    gc.collect()
    torch.cuda.empty_cache()


def run_quantized(args, archive: Path, max_len: int, r: dict, score_tokens=None):
    """The quantized model: its bytes, times and timeline (and the knock-out sweep's times)
    into r; returns its greedy tokens and, given score_tokens, its teacher-forced logits along
    them."""
    q = iris.models.load(archive, max_len=max_len, compile=args.compile, programmatic=args.programmatic,
                         residual_norm=args.residual_norm, rope_in_attention=args.rope_in_attention, nf4_table=args.nf4_table,
                         activation_in_gemv=args.activation_in_gemv, iris_head=args.compile and args.iris_head,
                         gated_kernel=args.gated_kernel)
    if args.gated_separate:  # measurement aid: iris's activation as its own launch, not inside gate/up's
        q.gated_in_gemv = False
    r.update(bytes_per_token=q.bytes_per_token, bytes_by_kernel=q.bytes_by_kernel)
    r.update(time_decoder(q, args.steps))
    r["timeline"] = timeline(q)
    tokens = q.generate(PROMPT, args.steps, graph=True)
    scored = q.score(PROMPT, score_tokens) if score_tokens is not None else None
    knock_out_sweep(args, q, r)
    del q
    release()
    return tokens, scored


def exact_check(args, archive: Path, max_len: int) -> dict:
    """The greedy check with both sides in the order-free arithmetic (iris.models exact_sums=True):
    the BF16 peer (the archive dequantized to BF16, as `iris export --dtype bf16` writes it)
    and the quantized model (its weights' FP32 values; MXFP4 expert stacks stay quantized, the
    picked experts dequantized at each call), eager, --exact-steps
    steps. With no summation order left to differ, tokens part only where the weights do."""
    steps = args.exact_steps
    ref = iris.models.load(archive, max_len=max_len, dequantize=True, compile=args.compile, exact_sums=True)
    ref_tokens = ref.generate(PROMPT, steps, graph=False)
    ref_logits = ref.score(PROMPT, ref_tokens, graph=False)
    ref_range = bool(ref.exact_out_of_range)
    del ref
    release()
    q = iris.models.load(archive, max_len=max_len, compile=args.compile, exact_sums=True)  # FP32 values: NF4's exact table
    q_tokens = q.generate(PROMPT, steps, graph=False)
    q_logits = q.score(PROMPT, ref_tokens, graph=False)
    q_range = bool(q.exact_out_of_range)
    del q
    release()
    g = greedy_check(ref_logits, q_logits, ref_tokens, q_tokens)
    g["out_of_range"] = {"bf16_peer": ref_range, "quantized": q_range}
    return g


KNOCK_OUT_SWEEP = ["activation", "attention", "norm", "attention,activation", "attention,activation,norm"]


def knock_out_sweep(args, q, r: dict) -> None:
    """--knock-out-sweep: the quantized decoder q's graph step timed again with each kind of the
    layers' non-GEMV steps left out (LlamaDecoder.set_knock_out), then all of them, beside the
    whole step timed again in the same state: what each costs on the step's critical path,
    which the timeline's overlapping kernel durations do not say. Timing only: the tokens of a
    knocked-out step mean nothing."""
    if not args.knock_out_sweep:
        return
    if not hasattr(q, "set_knock_out"):
        r["knock_out_ms"] = "this family has no knock-outs"
        return
    sweep = {}
    for names in [""] + KNOCK_OUT_SWEEP:
        try:
            q.set_knock_out(names.split(",") if names else [])
            sweep[names] = time_decoder(q, args.steps)["graph_ms"]
        except Exception as e:  # noqa: BLE001 - a refused knock-out (Mixtral) or a failed one must not end the bench
            sweep[names] = f"{type(e).__name__}: {e}"
    q.set_knock_out([])
    r["knock_out_ms"] = sweep


def knock_out_lines(r: dict) -> list:
    sweep = r.get("knock_out_ms")
    if not isinstance(sweep, dict) or not isinstance(sweep.get(""), float):
        return [f"    knock-out sweep: {sweep}"] if sweep else []
    whole = sweep[""]
    return [f"    without {names}: {ms:.3f} ms ({whole - ms:+.3f} on the critical path)" if isinstance(ms, float) else f"    without {names}: {ms}"
            for names, ms in sweep.items() if names]


def add_ratios(r: dict, limits: dict) -> dict:
    """Tokens/s and the shares of the run's two ceilings; against the peer where there is one."""
    ms = r["graph_ms"]
    r["tokens_per_s"] = 1e3 / ms
    r["copy_roofline_ms"] = r["bytes_per_token"] / limits["copy_GBps"] / 1e6
    r["share_of_copy_roofline"] = r["copy_roofline_ms"] / ms
    r["share_of_cublas_bw"] = (r["bytes_per_token"] / limits["cublas_bf16_GBps"] / 1e6) / ms
    if "bf16_peer_graph_ms" in r:
        r["speedup_vs_bf16_peer"] = r["bf16_peer_graph_ms"] / ms
        r["bf16_peer_share_of_copy_roofline"] = r["bf16_peer_bytes_per_token"] / limits["copy_GBps"] / 1e6 / r["bf16_peer_graph_ms"]
    return r


def time_without_decode_kernels(args, archive: Path, max_len: int, r: dict) -> None:
    """--ab-decode-kernels: the same compiled model with transformers' attention and router
    steps in place of iris's decode kernels (attention_decode, moe_route): what they gain."""
    if not (args.ab_decode_kernels and args.compile):
        return
    plain = iris.models.load(archive, max_len=max_len, compile=True, fused=False, programmatic=args.programmatic)
    t = time_decoder(plain, args.steps)
    r["without_decode_kernels_graph_ms"], r["without_decode_kernels_timeline"] = t["graph_ms"], timeline(plain)
    del plain
    release()


def run_format(args, archive: Path, limits: dict, max_len: int, compare_uncompiled: bool) -> dict:
    r = {"compiled": args.compile, "programmatic_inductor": args.compile and args.programmatic, "nf4_table": args.nf4_table,
         "residual_norm": args.compile and args.residual_norm, "rope_in_attention": args.compile and args.rope_in_attention,
         "activation_in_gemv": args.compile and args.activation_in_gemv, "iris_head": args.compile and args.iris_head,
         "gated_kernel": args.compile and args.gated_kernel, "gated_separate": args.gated_separate}
    if args.no_peer:  # a model whose BF16 twin does not fit the card: the quantized one alone
        time_without_decode_kernels(args, archive, max_len, r)
        tokens, _ = run_quantized(args, archive, max_len, r)
        r["tokens"] = tokens[:16]
        return add_ratios(r, limits)
    # The BF16 peer first: its sequence is the one both models are scored on. Its lm_head stays
    # on cuBLAS (iris_head=False): the goal's peer is BF16 cuBLAS.
    ref = iris.models.load(archive, max_len=max_len, dequantize=True, compile=args.compile, programmatic=args.programmatic,
                           residual_norm=args.residual_norm, rope_in_attention=args.rope_in_attention, iris_head=False,
                           gated_kernel=args.gated_kernel)
    r["bf16_peer_bytes_per_token"] = ref.bytes_per_token
    peer = time_decoder(ref, args.steps)
    r["bf16_peer_graph_ms"], r["bf16_peer_eager_ms"] = peer["graph_ms"], peer["eager_ms"]
    ref_tokens = ref.generate(PROMPT, args.steps, graph=True)
    ref_logits = ref.score(PROMPT, ref_tokens)
    del ref
    release()
    if args.self_check:
        # The check's noise floor: the same BF16 weights in the other arithmetic iris.models
        # offers (compiled: fused elementwise work and q/k/v, gate/up concatenated into one
        # cuBLAS GEMV; uncompiled: transformers' order), scored on the same sequence. Where
        # two implementations of one BF16 model part, a quantized model's parting there says
        # nothing about its weights.
        twin = iris.models.load(archive, max_len=max_len, dequantize=True, compile=not args.compile)
        twin_tokens = twin.generate(PROMPT, args.steps, graph=True)
        r["bf16_self_check"] = greedy_check(ref_logits, twin.score(PROMPT, ref_tokens), ref_tokens, twin_tokens)
        del twin
        release()
    if compare_uncompiled and args.compile:
        plain = iris.models.load(archive, max_len=max_len)
        t = time_decoder(plain, args.steps)
        r["uncompiled_graph_ms"], r["uncompiled_timeline"] = t["graph_ms"], timeline(plain)
        del plain
        release()
    time_without_decode_kernels(args, archive, max_len, r)
    q_tokens, q_logits = run_quantized(args, archive, max_len, r, ref_tokens)
    r["greedy"] = greedy_check(ref_logits, q_logits, ref_tokens, q_tokens)
    if args.exact_check:
        r["greedy_exact"] = exact_check(args, archive, max_len)
    return add_ratios(r, limits)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--iris", required=True)
    ap.add_argument("--make-snapshot", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--models", default="llama-3-8b,gpt-oss-20b")
    ap.add_argument("--formats", default="mxfp4,nf4,fp8-block,fp8-channel",
                    help="for the dense families; FMT+head also quantizes lm_head")
    ap.add_argument("--layers", type=int, default=0)
    ap.add_argument("--steps", type=int, default=64)
    ap.add_argument("--direct", action="store_true",
                    help="write the archives straight from the config (iris_make_snapshot --archive; dense families in "
                         "mxfp4 or nf4), no snapshot on disk (gpt-oss-120b's would not fit beside its archive, a BF16 "
                         "Mixtral-8x7B's fits no disk here)")
    ap.add_argument("--no-peer", action="store_true", help="no BF16 peer and no greedy check (a model whose BF16 twin does not fit)")
    ap.add_argument("--no-self-check", dest="self_check", action="store_false",
                    help="skip the greedy check's noise floor (the BF16 peer against itself in the other arithmetic)")
    ap.add_argument("--ab-decode-kernels", action="store_true",
                    help="also time the compiled model without iris's attention and router kernels (fused=False)")
    ap.add_argument("--no-programmatic", dest="programmatic", action="store_false",
                    help="Inductor's kernels launched plainly (iris.models programmatic=False; iris's own follow libiris)")
    ap.add_argument("--no-residual-norm", dest="residual_norm", action="store_false",
                    help="the residual steps and norms as Inductor's kernels (iris.models residual_norm=False), not iris's")
    ap.add_argument("--activation-in-gemv", action="store_true",
                    help="gpt-oss's expert activation inside the gate_up expert GEMV's launch (iris.models activation_in_gemv=True), "
                         "not an Inductor kernel after it")
    ap.add_argument("--no-gated-kernel", dest="gated_kernel", action="store_false",
                    help="a gated MLP's SiLU activation as Inductor's kernel (iris.models gated_kernel=False), not iris's gated_silu")
    ap.add_argument("--gated-separate", action="store_true",
                    help="the quantized model's gated activation as iris's own launch (torch.ops.iris.gated_silu) even where "
                         "its gate/up launch could apply it (a measurement aid)")
    ap.add_argument("--no-iris-head", dest="iris_head", action="store_false",
                    help="the quantized model's dense BF16 lm_head on cuBLAS (iris.models iris_head=False), not on iris's dense GEMV")
    ap.add_argument("--no-rope-in-attention", dest="rope_in_attention", action="store_false",
                    help="the rotary positions and the KV-cache write as Inductor's kernels (iris.models rope_in_attention=False), not inside iris's attention kernel")
    ap.add_argument("--nf4-table", choices=["exact", "bf16"], default="exact",
                    help="the quantized model's NF4 GEMVs: exact (each table value as two BF16s, 2^-16) or bf16 (each weight "
                         "as bitsandbytes' GEMV forms it in BF16: three roundings of 2^-8)")
    ap.add_argument("--knock-out-sweep", action="store_true",
                    help="time the graph step again without each kind of non-GEMV step (attention, activation, norms) "
                         "and without all: their cost on the critical path (Llama-family models; timing only)")
    ap.add_argument("--exact-check", action="store_true",
                    help="the greedy check again with both models in the order-free arithmetic (iris.models exact_sums=True, "
                         "eager): tokens part only where the weights differ")
    ap.add_argument("--exact-steps", type=int, default=64, help="steps of --exact-check (at most --steps)")
    ap.add_argument("--no-compile", dest="compile", action="store_false",
                    help="the work between GEMVs unfused (iris.models compile=False)")
    args = ap.parse_args()
    if args.exact_check and (args.no_peer or not 1 <= args.exact_steps <= args.steps):
        ap.error("--exact-check needs the peer (no --no-peer) and 1 <= --exact-steps <= --steps")
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    result = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "steps": args.steps, "layers": args.layers,
              "prompt": PROMPT, "models": {}}
    result["ceilings"] = limits = ceilings()
    log(json.dumps(limits))
    max_len = len(PROMPT) + args.steps + 16
    for name in args.models.split(","):
        if args.direct:
            kind = json.loads((HERE / "models" / f"{name}.json").read_text())["model_type"]
            formats = ["as-shipped"] if kind == "gpt_oss" else args.formats.split(",")
            archives = {}
            for fmt in formats:
                config, archives[fmt] = make_archive_direct(args, name, work, fmt)
            model = result["models"][name] = {"layers": config["num_hidden_layers"], "formats": {}, "written_directly": True}
        else:
            config, snap = make_model(args, name, work)
            formats = ["as-shipped"] if config["model_type"] == "gpt_oss" else args.formats.split(",")
            archives = {}
            model = result["models"][name] = {"layers": config["num_hidden_layers"], "formats": {}}
            for fmt in formats:
                archives[fmt] = work / f"{name}-{fmt}.iris"
                model.setdefault("convert_s", {})[fmt] = convert(args, snap, archives[fmt], fmt)
                log(f"{name} {fmt}: converted in {model['convert_s'][fmt]:.1f} s, {archives[fmt].stat().st_size / 1e9:.2f} GB")
            shutil.rmtree(snap)
        for fmt in formats:
            try:
                r = run_format(args, archives[fmt], limits, max_len, compare_uncompiled=fmt == formats[0])
            except Exception as e:  # noqa: BLE001 - one failing format must not hide the others
                r = {"error": f"{type(e).__name__}: {e}"}
            model["formats"][fmt] = r
            archives[fmt].unlink()
            if "error" in r:
                log(f"{name} {fmt}: {r['error']}")
                continue
            if args.no_peer:
                log(f"{name} {fmt}: graph {r['graph_ms']:.3f} ms/token (eager {r['eager_ms']:.2f})"
                    + (f", without decode kernels {r['without_decode_kernels_graph_ms']:.3f}" if "without_decode_kernels_graph_ms" in r else "")
                    + f"; {r['bytes_per_token'] / 1e9:.2f} GB/token, "
                    f"{100 * r['share_of_copy_roofline']:.1f}% of copy roofline; {r['timeline']['kernels_per_step']:.0f} kernels/step")
                for g, v in r["timeline"]["groups"].items():
                    log(f"    {g}: {v['us_per_step']:.0f} us/step ({100 * v['share']:.1f}%), {v['kernels_per_step']:.0f} kernels")
                for line in knock_out_lines(r):
                    log(line)
                continue
            log(f"{name} {fmt}: graph {r['graph_ms']:.3f} ms/token (eager {r['eager_ms']:.2f}"
                + (f", unfused graph {r['uncompiled_graph_ms']:.3f}" if "uncompiled_graph_ms" in r else "")
                + (f", without decode kernels {r['without_decode_kernels_graph_ms']:.3f}" if "without_decode_kernels_graph_ms" in r else "")
                + f"), BF16 peer {r['bf16_peer_graph_ms']:.3f} -> {r['speedup_vs_bf16_peer']:.2f}x; "
                f"{r['bytes_per_token'] / 1e9:.2f} GB/token, {100 * r['share_of_copy_roofline']:.1f}% of copy roofline "
                f"(peer {100 * r['bf16_peer_share_of_copy_roofline']:.1f}%); {r['timeline']['kernels_per_step']:.0f} kernels/step")
            g = r["greedy"]
            log(f"    greedy: free-running equal {g['free_running_equal']} (first difference {g['free_running_first_difference']}); "
                f"teacher-forced {g['teacher_forced_agree']}/{g['steps']} agree, differences at {g['teacher_forced_differ_at']} "
                f"margins {[round(m, 4) for m in g['differ_margins']]} vs logit diffs {[round(m, 4) for m in g['differ_logit_diffs']]}; "
                f"max logit diff {g['max_logit_diff']:.4f}, median margin {g['median_ref_margin']:.4f}")
            if "greedy_exact" in r:
                e = r["greedy_exact"]
                log(f"    exact sums on both sides: free-running equal {e['free_running_equal']} (first difference "
                    f"{e['free_running_first_difference']}); teacher-forced {e['teacher_forced_agree']}/{e['steps']} agree; "
                    f"max logit diff {e['max_logit_diff']:.4f}; out of range {e['out_of_range']}")
            if "bf16_self_check" in r:
                s = r["bf16_self_check"]
                log(f"    noise floor, BF16 peer against itself (compile={not args.compile}): free-running equal "
                    f"{s['free_running_equal']} (first difference {s['free_running_first_difference']}); teacher-forced "
                    f"{s['teacher_forced_agree']}/{s['steps']} agree; max logit diff {s['max_logit_diff']:.4f}")
            for g, v in r["timeline"]["groups"].items():
                log(f"    {g}: {v['us_per_step']:.0f} us/step ({100 * v['share']:.1f}%), {v['kernels_per_step']:.0f} kernels")
            for line in knock_out_lines(r):
                log(line)
        Path(args.out).write_text(json.dumps(result, indent=1))
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
