"""iris.models, iris's own decode forward, on the GPU (skipped, saying why, without torch,
CUDA or libiris with CUDA):

- its greedy tokens equal those of transformers' model patched with iris.torch on the same
  archive (the same kernels, transformers' forward around them), for Llama (mxfp4, nf4,
  fp8-block, fp8-channel, nvfp4, bnb nf4), Mistral with a sliding window shorter than the run,
  Qwen2 with attention biases, Mixtral's nf4 and nvfp4 experts and gpt-oss's MXFP4 experts (sliding
  and full layers, sinks, YaRN); the models have random weights and a small vocabulary, so
  their tokens vary (checked: a constant sequence would prove little) and their top logits
  are far enough apart for rounding not to decide them;
- compile=True (the work between GEMVs through torch.compile) picks the same tokens with
  transformers' attention and router steps (fused=False); with iris's decode kernels (the
  default), teacher-forced on transformers' sequence its logits stay close;
- the CUDA-graph step gives the eager step's logits bit for bit;
- load(dequantize=True) is the model `iris export --dtype bf16` writes: the same logits, bit for
  bit, as the decoder loaded from that export, in the fast arithmetic and in the exact sums;
- an archive tensor the model does not take, a tensor it needs and lacks, an unknown
  model_type and a run past max_len are refused by name."""

import json
import shutil

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device here; these run on the GPU machine (bench/gpu_run.sh)", allow_module_level=True)

from iris_archive import _native  # noqa: E402

if _native.library() is None:
    pytest.skip(f"libiris not found: {_native.why_not()}", allow_module_level=True)

import iris_archive as iris  # noqa: E402
import iris_archive.models  # noqa: F401,E402 - iris.models
import iris_archive.torch as itorch  # noqa: E402
from conftest import FIXTURES, MAKE_SNAPSHOT, run_iris  # noqa: E402
from iris_archive import IrisError  # noqa: E402

PROMPT = [1, 15, 27, 8, 99, 3, 42, 7]
STEPS = 24


def _transformers_greedy(transformers, config_dir, archive, prompt, steps):
    """transformers' model built on the meta device from config_dir's config, patched from the
    archive, decoding greedily with its own cache: the reference token sequence, and the
    scores its picks came from (BF16 logits widened to FP32)."""
    config = transformers.AutoConfig.from_pretrained(config_dir)
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    model.eval()
    keep = itorch.patch(model, archive)
    ids = torch.tensor([prompt], device="cuda")
    with torch.no_grad():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=steps, do_sample=False, pad_token_id=0,
                             output_scores=True, return_dict_in_generate=True)
    del keep
    return out.sequences[0, len(prompt):].tolist(), torch.cat([sc.float() for sc in out.scores])


def _check_against_transformers(label, config_dir, archive, prompt=PROMPT, steps=STEPS, at_least=12):
    """At every step iris.models picks a token transformers scores highest: transformers' own
    pick, or where its BF16 logits tie exactly, one of the tied tokens (it takes the lower id;
    iris.models' FP32 logits, the larger value). The sequences are compared up to the first step
    where iris.models takes another of the tied tokens (from there on they are fed different
    tokens); at least `at_least` steps must be compared, or the check would prove little."""
    transformers = pytest.importorskip("transformers")
    want, scores = _transformers_greedy(transformers, config_dir, archive, prompt, steps)
    best = scores.max(dim=-1).values

    def compared_steps(got, what):
        for i in range(steps):
            assert scores[i, got[i]] == best[i], f"{label}: {what} picks {got[i]} at step {i}, transformers {want[i]} ({got} vs {want})"
            if got[i] != want[i]:
                return i + 1
        return steps

    m = iris.models.load(archive, max_len=64)
    eager = m.generate(prompt, steps, graph=False)
    graphed = m.generate(prompt, steps, graph=True)
    print(f"{label}: {m.family}, {m.bytes_per_token / 1e6:.2f} MB of weights per token; tokens {graphed[:12]}...")
    assert eager == graphed, f"{label}: the CUDA-graph step picks other tokens than the eager step"
    n = compared_steps(graphed, "iris.models")
    assert n >= at_least, f"{label}: only {n} steps before a tie parted the sequences: too few for a meaningful comparison"
    assert len(set(want[:n])) >= min(4, at_least // 2), f"{label}: the reference repeats itself ({want}): a weak check"
    # compile=True with transformers' attention and router steps (fused=False): Inductor's
    # fusions round less often, and the tokens still agree
    compiled = iris.models.load(archive, max_len=64, compile=True, fused=False).generate(prompt, steps, graph=True)
    # (An exact BF16 tie may part this run sooner than the one above, which has already shown
    # the sequence long enough to mean something: half as many steps, every one a top pick.)
    assert compared_steps(compiled, "compile=True, fused=False") >= at_least // 2
    # compile=True as it runs by default, with iris's attention, router and dense-GEMV kernels:
    # their sums come in another order than cuBLAS's, so a router whose logits nearly tie in
    # BF16 may pick another expert; teacher-forced on transformers' sequence, the logits stay
    # close and mostly pick transformers' token (a wrong window, scale, sink or expert id would
    # move every step's logits)
    fused = iris.models.load(archive, max_len=64, compile=True).score(prompt, want)
    diff = (fused - scores).abs()
    agree = (fused.argmax(-1) == scores.argmax(-1)).float().mean().item()
    print(f"{label}: fused kernels, teacher-forced: median |logit diff| {diff.median().item():.4f}, max {diff.max().item():.3f}, "
          f"top-1 agreement {agree:.2f}")
    assert diff.median().item() <= 0.05 and agree >= 0.5, f"{label}: the fused kernels' logits part from transformers'"


def _tiny_snapshot(tmp_path, family, **overrides):
    transformers = pytest.importorskip("transformers")
    from test_torch_gpu import _random_snapshot, _tiny_config

    config = _tiny_config(transformers, "llama" if family == "mistral" else family)
    if family == "mistral":
        config = transformers.MistralConfig(**{k: v for k, v in config.to_dict().items() if k in (
            "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
            "max_position_embeddings", "tie_word_embeddings")})
    for k, v in overrides.items():
        setattr(config, k, v)
    src = tmp_path / family
    _random_snapshot(transformers, config, src, 0.05, mixtral_names=family == "mixtral")
    return src


@pytest.mark.parametrize("quant", ["mxfp4", "nf4", "fp8-block", "fp8-channel", "nvfp4"])
def test_llama_tokens_equal_transformers(tmp_path, quant):
    src = _tiny_snapshot(tmp_path, "llama")
    archive = tmp_path / f"llama-{quant}.iris"
    run_iris("convert", src, "-o", archive, "--quant", quant, "-q")
    _check_against_transformers(f"llama {quant}", src, archive, prompt=[3, 14, 15, 52, 61, 35, 9, 7])


def test_bnb_nf4_checkpoint_runs(converted):
    """The bitsandbytes NF4 fixture (double quantization) as it is: its tiny model repeats one
    token, so this checks the run and the equality, not the variety."""
    transformers = pytest.importorskip("transformers")
    archive = converted("llama-nf4-dq")
    want, _ = _transformers_greedy(transformers, FIXTURES / "llama-nf4-dq", archive, PROMPT, STEPS)
    assert iris.models.load(archive, max_len=64).generate(PROMPT, STEPS) == want


def test_nf4_bf16_table_where_it_has_nothing_to_act_on_is_refused(converted):
    """nf4_table="bf16" changes NF4 GEMVs only: with dequantize=True or a snapshot folder it
    would be dropped silently, so it is refused, naming why; with NF4 GEMVs the model runs."""
    archive = converted("llama-nf4-dq")
    with pytest.raises(IrisError, match="dequantize=True"):
        iris.models.load(archive, dequantize=True, nf4_table="bf16")
    with pytest.raises(IrisError, match="snapshot folder"):
        iris.models.load(FIXTURES / "llama-bf16", nf4_table="bf16")
    assert len(iris.models.load(archive, max_len=16, nf4_table="bf16").generate(PROMPT[:4], 4)) == 4


@pytest.mark.parametrize("family,quant,overrides", [("qwen2", "fp8-block", {"attention_bias": True}),
                                                    ("mixtral", "nf4", {}),
                                                    ("mixtral", "nvfp4", {}),
                                                    ("mistral", "mxfp4", {"sliding_window": 6})])
def test_other_families_tokens_equal_transformers(tmp_path, family, quant, overrides):
    src = _tiny_snapshot(tmp_path, family, **overrides)
    archive = tmp_path / f"{family}.iris"
    run_iris("convert", src, "-o", archive, "--quant", quant, "-q")
    _check_against_transformers(f"{family} {quant}", src, archive, prompt=[3, 14, 15, 52, 61, 35, 9, 7])


@pytest.mark.parametrize("quant,nf4_table", [("mxfp4", "exact"), ("nf4", "bf16"), ("nf4", "exact"), ("nvfp4", "exact")])
def test_mixtral_gate_and_up_in_one_launch_change_no_bit(tmp_path, quant, nf4_table):
    """Mixtral's w1 and w3 of the picked experts, and their activation, in one grouped launch
    (where libiris takes the activation there) give the logits and tokens of w1's launch, w3's
    and the activation's own, bit for bit, in a compiled CUDA-graph step."""
    src = _tiny_snapshot(tmp_path, "mixtral")
    archive = tmp_path / f"mixtral-{quant}.iris"
    run_iris("convert", src, "-o", archive, "--quant", quant, "-q")
    m = iris.models.load(archive, max_len=32, compile=True, nf4_table=nf4_table)
    moes = [layer.mlp for layer in m.layers]
    one_launch = [moe.gate_up is not None for moe in moes]
    if quant == "mxfp4":  # its activation store costs the kernel nothing (kernels/NOTES.md v66)
        assert all(one_launch) == all(moe.w1.experts.tensor_cores for moe in moes)
    prompt = [3, 14, 15, 52, 61, 35, 9, 7]  # inside the tiny vocabulary
    tokens = m.generate(prompt, 8)
    fused = m.logits.clone()
    m.gated_in_gemv = False  # w1, w3 and the activation as three launches
    m._graph = None
    assert m.generate(prompt, 8) == tokens
    assert torch.equal(m.logits, fused)


@pytest.mark.parametrize("experts,top_k,steps", [(4, 4, STEPS), (8, 2, 8)])
def test_gpt_oss_tokens_equal_transformers(tmp_path, experts, top_k, steps):
    """gpt-oss from iris_make_snapshot --config (MXFP4 expert stacks as shipped, random codes and
    scales, RMSNorm weights 1): 4 layers (sliding, full, ...) with a 5-token window, YaRN, sinks;
    converted as it is.

    With every expert active (4 of 4) the routing is continuous, so the whole run is compared.
    With 2 of 8, a router's near-tie turns a last-bit difference anywhere before it (the two
    forwards' attention matmuls have other shapes: iris.models reads a static cache) into
    another expert and another continuation, so only the first steps are compared: they show
    the top-k selection itself agrees."""
    config = json.loads((FIXTURES.parents[2] / "bench" / "models" / "gpt-oss-20b.json").read_text())
    config.update(num_hidden_layers=4, layer_types=["sliding_attention", "full_attention"] * 2, sliding_window=5, hidden_size=512,
                  intermediate_size=512, num_attention_heads=8, num_key_value_heads=4, head_dim=64, num_local_experts=experts,
                  num_experts_per_tok=top_k, experts_per_token=top_k, vocab_size=128, max_position_embeddings=4096,
                  pad_token_id=None, eos_token_id=None)
    (tmp_path / "config.json").write_text(json.dumps(config))
    import subprocess

    subprocess.run([MAKE_SNAPSHOT, str(tmp_path / "snap"), "--config", str(tmp_path / "config.json")], check=True, capture_output=True)
    archive = tmp_path / "gpt-oss.iris"
    run_iris("convert", tmp_path / "snap", "-o", archive, "-q")
    _check_against_transformers(f"gpt-oss mxfp4, {top_k} of {experts} experts", tmp_path / "snap", archive,
                                prompt=[3, 14, 15, 52, 61, 35, 9, 7], steps=steps, at_least=min(12, steps))


@pytest.mark.parametrize("compile", [False, True])
def test_graph_step_equals_eager_step_bit_for_bit(converted, compile):
    m = iris.models.load(converted("gptoss-mxfp4"), max_len=32, compile=compile)
    m.generate(PROMPT, 4, graph=False)
    eager = m.logits.clone()
    m.generate(PROMPT, 4, graph=True)
    assert torch.equal(m.logits, eager)
    tokens = m.generate(PROMPT, 6)
    assert m.score(PROMPT, tokens).argmax(-1).tolist() == tokens  # teacher forcing on its own picks


@pytest.mark.parametrize("fixture", ["gptoss-mxfp4", "llama-nf4-dq"])
def test_programmatic_launches_change_no_bit(converted, fixture):
    """A compiled step with every kernel a programmatic dependent of the one before (Inductor's
    and iris's: each may start before its producer ends and must wait for it before reading)
    gives the logits of the same step launched plainly, in a CUDA graph and eagerly."""
    logits = {}
    for programmatic in (False, True):
        m = iris.models.load(converted(fixture), max_len=32, compile=True, programmatic=programmatic)
        for graph in (False, True):
            m.generate(PROMPT, 6, graph=graph)
            logits[programmatic, graph] = m.logits.clone()
    for key, value in logits.items():
        assert torch.equal(value, logits[False, False]), key


def test_knock_outs_change_the_step_and_come_back(converted):
    """The measurement aid of bench/decode_bench.py --knock-out-sweep: each knock-out changes
    what a step computes, in a CUDA graph as eagerly (the graph is captured again, not the old
    one replayed), and clearing them gives the whole step's logits back bit for bit; a name it
    does not know is refused."""
    m = iris.models.load(converted("llama-nf4-dq"), max_len=32, compile=True)
    m.generate(PROMPT, 4, graph=True)
    whole = m.logits.clone()
    for names in (["attention"], ["activation"], ["norm"], ["attention", "activation", "norm"]):
        m.set_knock_out(names)
        m.generate(PROMPT, 4, graph=False)
        eager = m.logits.clone()
        m.generate(PROMPT, 4, graph=True)
        assert torch.equal(m.logits, eager), names
        assert not torch.equal(eager, whole), names
    m.set_knock_out([])
    m.generate(PROMPT, 4, graph=True)
    assert torch.equal(m.logits, whole)
    with pytest.raises(IrisError, match="no such knock-out"):
        m.set_knock_out(["router"])


@pytest.mark.parametrize("fixture", ["gptoss-mxfp4", "llama-nf4-dq"])
def test_rope_in_attention_keeps_the_logits(converted, fixture):
    """The rotary positions and the cache write inside the attention kernel (rope_in_attention)
    round once in FP32 where Inductor's kernel may contract differently: teacher-forced on the
    same tokens, the logits stay within a small distance of the default's and pick the same
    tokens, in a CUDA graph."""
    base = iris.models.load(converted(fixture), max_len=32, compile=True, rope_in_attention=False)
    tokens = base.generate(PROMPT, 8)
    want = base.score(PROMPT, tokens)
    del base
    got = iris.models.load(converted(fixture), max_len=32, compile=True, rope_in_attention=True).score(PROMPT, tokens)
    diff = (got - want).abs()
    assert diff.median().item() <= 0.01 and (got.argmax(-1) == want.argmax(-1)).float().mean().item() >= 0.85, diff.max().item()


@pytest.mark.parametrize("options", [(), ("--quant", "nf4")])
def test_activation_in_gemv_keeps_the_logits(converted, options):
    """gpt-oss's expert activation inside the gate_up GEMV (activation_in_gemv) rounds at each
    of transformers' BF16 steps, where Inductor's kernel after the GEMV rounds once:
    teacher-forced on the same tokens, the logits stay close to the other's and pick the same
    tokens, in a CUDA graph; the layers do run it."""
    path = converted("gptoss-mxfp4", *options)
    base = iris.models.load(path, max_len=32, compile=True)
    assert not any(layer.activation_in_gemv for layer in base.layers), "off by default"
    tokens = base.generate(PROMPT, 8)
    want = base.score(PROMPT, tokens)
    del base
    m = iris.models.load(path, max_len=32, compile=True, activation_in_gemv=True)
    assert all(layer.activation_in_gemv for layer in m.layers)
    got = m.score(PROMPT, tokens)
    diff = (got - want).abs()
    assert diff.median().item() <= 0.02 and (got.argmax(-1) == want.argmax(-1)).float().mean().item() >= 0.85, diff.max().item()


def test_dequantized_model_is_the_bf16_export(converted, tmp_path):
    archive = converted("llama-bf16", "--quant", "nf4")
    export = tmp_path / "export"
    run_iris("export", archive, "-o", f"{export}/", "--dtype", "bf16", "-q")
    a = iris.models.load(archive, max_len=48, dequantize=True)
    b = iris.models.load(export, max_len=48)
    ta, tb = a.generate(PROMPT, 16), b.generate(PROMPT, 16)
    assert ta == tb
    assert torch.equal(a.logits, b.logits)
    q = iris.models.load(archive, max_len=48)
    assert q.bytes_per_token < a.bytes_per_token / 2  # nf4 layers read about a quarter of BF16's bytes
    assert a.bytes_by_kernel["iris"] == 0 and q.bytes_by_kernel["iris"] > 0


def test_exact_sums_of_the_dequantized_model_are_the_bf16_export_s(converted, tmp_path):
    """load(dequantize=True, exact_sums=True) is the export's model in the order-free arithmetic:
    its weights rounded to BF16 as the export rounds them (not the archive's FP32 values, which
    NF4's exact table keeps), so it gives the export folder's own exact-sums logits bit for bit."""
    archive = converted("llama-bf16", "--quant", "nf4")
    export = tmp_path / "export"
    run_iris("export", archive, "-o", f"{export}/", "--dtype", "bf16", "-q")
    a = iris.models.load(archive, max_len=48, dequantize=True, exact_sums=True, compile=True)
    b = iris.models.load(export, max_len=48, exact_sums=True, compile=True)
    ta, tb = a.generate(PROMPT, 16, graph=False), b.generate(PROMPT, 16, graph=False)
    assert ta == tb
    assert torch.equal(a.logits, b.logits)
    assert not bool(a.exact_out_of_range) and not bool(b.exact_out_of_range)


def test_refusals(converted, tmp_path):
    transformers = pytest.importorskip("transformers")
    from test_torch_gpu import _random_snapshot, _tiny_config

    config = _tiny_config(transformers, "llama")
    stray = tmp_path / "stray"
    _random_snapshot(transformers, config, stray, 0.05, extra=("model.layers.0.mlp.stray.weight",))
    run_iris("convert", stray, "-o", tmp_path / "stray.iris", "-q")
    with pytest.raises(IrisError, match="model.layers.0.mlp.stray.weight"):
        iris.models.load(tmp_path / "stray.iris")
    missing = tmp_path / "missing"
    _random_snapshot(transformers, config, missing, 0.05, drop=("model.layers.1.self_attn.k_proj.weight",))
    run_iris("convert", missing, "-o", tmp_path / "missing.iris", "-q")
    with pytest.raises(IrisError, match="model.layers.1.self_attn.k_proj.weight"):
        iris.models.load(tmp_path / "missing.iris")
    other = tmp_path / "other"
    shutil.copytree(stray, other)
    cfg = json.loads((other / "config.json").read_text())
    cfg["model_type"] = "falcon"
    (other / "config.json").write_text(json.dumps(cfg))
    run_iris("convert", other, "-o", tmp_path / "other.iris", "-q")
    with pytest.raises(IrisError, match="model_type 'falcon'"):
        iris.models.load(tmp_path / "other.iris")
    m = iris.models.load(converted("llama-bf16", "--quant", "mxfp4"), max_len=16)
    with pytest.raises(IrisError, match="max_len"):
        m.generate(PROMPT, 10)
