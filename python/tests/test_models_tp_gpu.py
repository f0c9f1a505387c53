"""iris.models' tensor-parallel decode (models/_parallel.py): for each fixture and format,
`iris shard --tp 2`, then examples/tensor_parallel/tp_decode.py must pick, for every step,
the tokens of the whole archive decoded on one GPU; so must expert-parallel ranks (--ep 2:
each rank its experts whole). With 2 GPUs: one process per GPU over
NCCL, each step one CUDA graph with the ranks' exchanges in it; with one: both ranks on it
over gloo, eager steps (NCCL refuses two ranks on one device), the same arithmetic. Skipped,
saying why, without torch, a CUDA device or libiris.

The ranks' column-split projections sum their FP32 partials across the ranks before rounding,
so their outputs differ from one GPU's only in the order of FP32 additions; the fixtures'
small models have top logits far enough apart for that not to decide a token, and every
step's logits, teacher-forced on the whole model's tokens, must stay within 2^-5 of the
step's largest. (At full size the FP32 order's one-ulp differences spread with depth and the
tokens part at near ties: docs/BENCHMARKS.md, "A tensor-parallel decode".) With exact sums
on both sides (--exact-sums: order-free dot products) nothing may differ at all: every logit and
every traced projection bit for bit. And the same decodes with the partials exchanged through
symmetric memory (--exchange symmetric, two GPUs only)."""

import json
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device here; these run on the GPU machines (bench/tp_decode_run.sh)", allow_module_level=True)

from iris_archive import _native  # noqa: E402

if _native.library() is None:
    pytest.skip(f"libiris not found: {_native.why_not()}", allow_module_level=True)

import iris_archive.models  # noqa: F401,E402 - iris.models
from conftest import ROOT, run_iris  # noqa: E402
from iris_archive import IrisError  # noqa: E402

EXAMPLE = ROOT / "examples" / "tensor_parallel" / "tp_decode.py"
STEPS = 24


@pytest.fixture(scope="module")
def ranks(converted, tmp_path_factory):
    made = {}

    def make(fixture, *options, ep=1):
        key = (fixture, options, ep)
        if key not in made:
            whole = converted(fixture, *options)
            out = tmp_path_factory.mktemp("ranks") / fixture
            run_iris("shard", whole, "--tp", "2", "--ep", str(ep), "-o", out, "-q")
            made[key] = (whole, out)
        return made[key]

    return make


BACKEND = "nccl" if torch.cuda.device_count() >= 2 else "gloo"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """Snapshots of transformers' own classes (random weights): Mixtral (per-expert w1/w2/w3,
    the experts' split) and a Llama whose MLP is 96 wide (three MXFP4 blocks: over 2 ranks
    64 + 32, the first rank one block wider, FORMAT.md section 11)."""
    transformers = pytest.importorskip("transformers")
    from test_torch_gpu import _random_snapshot, _tiny_config

    made = {}

    def make(family):
        if family not in made:
            config = _tiny_config(transformers, "mixtral" if family == "mixtral" else "llama")
            if family == "llama-96":
                config.intermediate_size = 96
            src = tmp_path_factory.mktemp("tiny") / family
            _random_snapshot(transformers, config, src, 0.05, mixtral_names=family == "mixtral")
            made[family] = src
        return made[family]

    return make


@pytest.mark.parametrize("family,ep", [("mixtral", 1), ("mixtral", 2), ("llama-96", 1)])
def test_tensor_parallel_tiny_models_equal_one_gpu(tiny, tmp_path, family, ep):
    whole = tmp_path / "w.iris"
    run_iris("convert", tiny(family), "-o", whole, "-q", "--quant", "mxfp4")
    folder = tmp_path / "ranks"
    run_iris("shard", whole, "--tp", "2", "--ep", str(ep), "-o", folder, "-q")
    _check_tp_run(whole, folder, tmp_path, f"{family} mxfp4 ep {ep}")


@pytest.mark.parametrize("how", [(), ("--no-compile",), ("--dequantize",)])
def test_expert_parallel_gpt_oss_equals_one_gpu(ranks, tmp_path, how):
    """--tp 2 --ep 2: each rank its two experts whole, the other two's pairs reading nothing;
    the picked experts' rows (with their biases) exchanged, then combined as on one GPU. Also
    in the uncompiled arithmetic (transformers' steps, Inductor's norms) and with the weights
    dequantized (dense stacks, gathered by clamped ids)."""
    whole, folder = ranks("gptoss-mxfp4", ep=2)
    _check_tp_run(whole, folder, tmp_path, f"gptoss-mxfp4 ep 2 {' '.join(how)}", how)


@pytest.mark.parametrize("how", [("--no-compile",), ("--dequantize",)])
def test_tensor_parallel_other_arithmetics_equal_one_gpu(ranks, tmp_path, how):
    whole, folder = ranks("llama-bf16", "--quant", "mxfp4")
    _check_tp_run(whole, folder, tmp_path, f"llama-bf16 mxfp4 {' '.join(how)}", how)


@pytest.mark.parametrize("fixture,options", [
    ("llama-bf16", ("--quant", "mxfp4")),
    ("llama-bf16", ("--quant", "fp8-channel")),
    # NF4's o and down kept BF16: their column cuts would cross its double-quantization groups
    ("llama-bf16", ("--quant", "nf4", "--rule", "(o_proj|down_proj)=bf16")),
    ("gptoss-mxfp4", ()),
])
def test_tensor_parallel_tokens_equal_one_gpu(ranks, tmp_path, fixture, options):
    whole, folder = ranks(fixture, *options)
    _check_tp_run(whole, folder, tmp_path, f"{fixture} {' '.join(options)}")


@pytest.mark.parametrize("fixture,options,ep", [
    ("llama-bf16", ("--quant", "mxfp4"), 1),
    ("gptoss-mxfp4", (), 1),
    ("gptoss-mxfp4", (), 2),
])
def test_symmetric_memory_exchange_equals_one_gpu(ranks, tmp_path, fixture, options, ep):
    """exchange="symmetric": the partial sums and shared rows summed through NVLink buffers
    (PyTorch's symmetric memory, one-shot, rank order) instead of NCCL's all_reduce, under the
    same bounds; each step one CUDA graph, the operator captured in it between the compiled
    pieces."""
    if BACKEND != "nccl":
        pytest.skip("symmetric memory needs two GPUs that read each other's memory (NCCL); this machine has one")
    whole, folder = ranks(fixture, *options, ep=ep)
    _check_tp_run(whole, folder, tmp_path, f"{fixture} {' '.join(options)} ep {ep} symmetric", ("--exchange", "symmetric"))


def test_symmetric_exchange_over_gloo_is_refused(ranks, tmp_path):
    whole, folder = ranks("llama-bf16", "--quant", "mxfp4")
    r = subprocess.run([sys.executable, str(EXAMPLE), str(whole), str(folder), "2", "--steps", "2", "--backend", "gloo",
                        "--exchange", "symmetric"], capture_output=True, text=True, timeout=600)
    assert r.returncode != 0
    assert "exchange='symmetric' needs the NCCL backend" in r.stderr, r.stderr[-3000:]


def _check_tp_run(whole, folder, tmp_path, label, how=()):
    out = tmp_path / "tp.json"
    # (no noise floor: these checks do not read it, and it is a third load of the whole model)
    r = subprocess.run([sys.executable, str(EXAMPLE), str(whole), str(folder), "2", "--steps", str(STEPS), "--json", str(out),
                        "--backend", BACKEND, "--no-noise-floor", *how], capture_output=True, text=True, timeout=600)
    assert out.exists(), f"tp_decode.py exited {r.returncode}: {r.stderr[-3000:]}"
    got = json.loads(out.read_text())
    print(f"{label}: {BACKEND}, {got['mode']}: tensor-parallel {got['tp_ms_per_token']} ms/token, "
          f"one GPU {got['whole_ms_per_token']}; teacher-forced logits within {got['teacher_forced_max_logit_difference']:.2e}")
    assert len(got["tp_tokens"]) == STEPS
    assert got["tokens_equal"], f"the ranks' tokens part from one GPU's: {got['first_difference']}"
    # Teacher-forced, every step's logits (the whole vocabulary, not only the pick) within 2^-5
    # of the step's largest. Measured on an H200: MXFP4 and FP8 channel 0 (bit for bit), gpt-oss
    # 3.1e-3, NF4 with BF16 o/down 1.0e-2 (the whole model's BF16 down runs on cuBLAS, the
    # ranks' halves on iris's dense GEMV: another order). A wrong head, slice or exchange moves
    # them by the logits' own size. (Some fixtures repeat one token: the logits are the check.)
    assert got["teacher_forced_picks_equal"] == STEPS
    assert got["teacher_forced_max_logit_difference"] <= 2.0 ** -5
    # The first layer's attention output projection, after the exchange, within one BF16 step
    # of the whole model's: before any difference has spread, only the FP32 order separates them.
    differ, worst, size = got["first_step_projections"][0]
    assert worst <= size * 2.0 ** -7, got["first_step_projections"][:2]
    assert r.returncode == 0, r.stderr[-3000:]
    # each rank reads its boxes: less than the whole model a token
    for b in got["rank_bytes_per_token"]:
        assert b < got["whole_bytes_per_token"]
    return got


@pytest.mark.parametrize("fixture,options,ep", [
    ("llama-bf16", ("--quant", "mxfp4"), 1),
    ("llama-bf16", ("--quant", "fp8-channel"), 1),
    ("llama-bf16", ("--quant", "nf4", "--rule", "(o_proj|down_proj)=bf16"), 1),
    ("gptoss-mxfp4", (), 1),
    ("gptoss-mxfp4", (), 2),
])
def test_exact_sums_give_one_gpu_s_bits(ranks, tmp_path, fixture, options, ep):
    """With exact sums on both sides (iris_archive._exact_sum), a split can change nothing:
    every projection after the exchange, and every teacher-forced logit, is one GPU's bit for
    bit -- the check that each head, slice, box and exchange is right, with no FP32-order noise
    left to hide a wrong one under."""
    whole, folder = ranks(fixture, *options, ep=ep)
    got = _check_tp_run(whole, folder, tmp_path, f"{fixture} {' '.join(options)} ep {ep} exact sums", ("--exact-sums",))
    assert got["exact_sums"] is True
    assert got["exact_out_of_range"] == {"ranks": [False, False], "whole": False}
    assert got["teacher_forced_max_logit_difference"] == 0.0
    assert all(differ == 0 for differ, _, _ in got["first_step_projections"]), got["first_step_projections"]


def test_a_rank_without_torch_distributed_is_refused(ranks):
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        pytest.skip("this process already has a process group")
    _, folder = ranks("llama-bf16", "--quant", "mxfp4")
    with pytest.raises(IrisError, match="torch.distributed"):
        iris_archive.models.load(folder, rank=0, world_size=2)


def test_rank_and_world_size_come_together(ranks):
    _, folder = ranks("llama-bf16", "--quant", "mxfp4")
    with pytest.raises(IrisError, match="together"):
        iris_archive.models.load(folder, rank=0)


def test_an_exchange_without_ranks_is_refused(converted):
    with pytest.raises(IrisError, match="exchange='symmetric' is how tensor-parallel ranks exchange"):
        iris_archive.models.load(converted("llama-bf16", "--quant", "mxfp4"), exchange="symmetric")


def test_expert_groups_of_several_ranks_are_refused(converted, tmp_path):
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        pytest.skip("this process already has a process group")
    folder = tmp_path / "r"
    run_iris("shard", converted("gptoss-mxfp4"), "--tp", "4", "--ep", "2", "-o", folder, "-q")
    with pytest.raises(IrisError, match="tp 4, ep 2"):
        iris_archive.models.load(folder, rank=0, world_size=4)


def test_a_rank_of_another_world_is_refused(ranks):
    _, folder = ranks("llama-bf16", "--quant", "mxfp4")
    with pytest.raises(IrisError, match="rank-00000-of-00004"):
        iris_archive.models.load(folder, rank=0, world_size=4)
