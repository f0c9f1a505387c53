"""iris.torch on the GPU (skipped, saying why, without torch, CUDA or libiris with CUDA):

- every tensor iris.torch.load puts on the device equals the CPU reader's: unquantized ones
  byte for byte, quantized ones through QuantTensor.dequantize() bit for bit;
- QuantTensor.linear (F.linear, x @ w.T) at 1..16 rows (the fused GEMV) and 40 rows
  (dequant + cuBLAS) within the FP32 accumulation bound below, of a float64 product of the
  same dequantized weights;
- a transformers Llama patched with IrisLinear against the same model holding the weights
  `iris export --dtype bf16` wrote: greedy continuations of 32 tokens identical, logits close.

The bounds, per output, against y64 = the float64 product of the exact (FP32) dequantized weights:
- up to 16 rows (the fused GEMV, FP32 weights): |y - y64| <= (K + 64) 2^-22 sum_k |w_k x_k| +
  2^-8 |y64|: FP32 accumulation on the tensor cores (verify/gemv_bound.h derives the first term)
  plus the one rounding of the BF16 output;
- above 16 rows (dequantize to BF16, then cuBLAS): 2^-9 sum_k |w_k x_k| more, for the one
  rounding of each weight to BF16 (exact for MXFP4, not for NF4 or FP8 products)."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device here; these run on the GPU machine (bench/gpu_run.sh)", allow_module_level=True)

import iris  # noqa: E402
from iris import _native  # noqa: E402

if _native.library() is None:
    pytest.skip(f"libiris not found: {_native.why_not()}", allow_module_level=True)

import iris.torch as itorch  # noqa: E402
from conftest import FIXTURES, read_safetensors, run_iris  # noqa: E402

ARCHIVES = [("gptoss-mxfp4", ()), ("llama-nf4-dq", ()), ("llama-fp8-block", ()), ("llama-bf16", ("--quant", "mxfp4")),
            ("llama-bf16", ("--quant", "nf4")), ("llama-bf16", ("--quant", "fp8-block")), ("llama-bf16", ("--quant", "fp8-channel"))]


def bf16_to_f64(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def _from_pretrained(transformers, path):
    try:
        m = transformers.AutoModelForCausalLM.from_pretrained(path, dtype=torch.bfloat16)
    except TypeError:  # transformers before 4.56 names it torch_dtype
        m = transformers.AutoModelForCausalLM.from_pretrained(path, torch_dtype=torch.bfloat16)
    return m.to("cuda").eval()


def _fill_from_export(model, export) -> int:
    """Sets the model's tensors to what `iris export --dtype bf16` wrote (the dequantized twin);
    returns how many were set. Expert stacks iris stores [E, N, K] go in transposed where the
    module holds [E, K, N] (gpt-oss)."""
    sd = model.state_dict()
    filled = 0
    with torch.no_grad():
        for k, v in read_safetensors(export).items():
            if k not in sd:
                continue
            t = torch.from_numpy(v.copy())
            t = t.view(torch.bfloat16) if t.dtype == torch.uint16 else t
            if t.dim() == 3 and tuple(t.shape) != tuple(sd[k].shape):
                t = t.transpose(1, 2)
            sd[k].copy_(t)
            filled += 1
    return filled


def _save_random(model_class, config, path, std: float):
    """A model of transformers' own classes with N(0, std) weights, saved as a snapshot."""
    model = model_class(config).to(torch.bfloat16)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, std)
    model.save_pretrained(path)


@pytest.mark.parametrize("fixture,options", ARCHIVES)
def test_load_equals_the_cpu_reader(converted, fixture, options):
    path = converted(fixture, *options)
    cpu = iris.open(path)
    free_before = torch.cuda.mem_get_info()[0]
    sd = itorch.load(path)
    torch.cuda.synchronize()
    used = free_before - torch.cuda.mem_get_info()[0]
    stored = sum(c[4] for t in cpu.tensors.values() for c in t._components)
    # One allocation, each component padded to 256 bytes; the driver rounds it up to 2 MiB pages.
    print(f"{fixture} {' '.join(options)}: GPU memory after load {used / 2**20:.1f} MiB for {stored / 2**20:.1f} MiB stored")
    assert used <= stored * 1.10 + (4 << 20), (used, stored)
    for name, t in cpu.tensors.items():
        v = sd[name]
        if not t.quantized:
            assert v.is_cuda and tuple(v.shape) == t.shape
            assert v.cpu().contiguous().view(torch.uint8).numpy().tobytes() == t.numpy().tobytes(), name
            continue
        assert isinstance(v, itorch.QuantTensor)
        got = v.dequantize(torch.bfloat16).cpu().view(torch.int16).numpy().view(np.uint16)
        assert np.array_equal(got, t.dequantize("bfloat16")), name
        got32 = v.dequantize(torch.float32).cpu().numpy()
        assert got32.tobytes() == t.dequantize("float32").tobytes(), name


@pytest.mark.parametrize("fixture,options", ARCHIVES[1:])
def test_linear_within_the_fp32_bound(converted, fixture, options):
    path = converted(fixture, *options)
    cpu = iris.open(path)
    sd = itorch.load(path)
    gen = torch.Generator().manual_seed(7)
    checked = 0
    for name, t in cpu.tensors.items():
        if not t.quantized or len(t.shape) != 2 or t.layout["kind"] != "tiled":
            continue
        w64 = t.dequantize("float32").astype(np.float64)
        n, k = t.shape
        for rows in (1, 3, 16, 40):
            x = (torch.rand(rows, k, generator=gen) * 2 - 1).to(torch.bfloat16)
            for how in ("linear", "F.linear", "matmul"):
                xc = x.cuda()
                q = sd[name]
                y = q.linear(xc) if how == "linear" else torch.nn.functional.linear(xc, q) if how == "F.linear" else xc @ q.T
                y = y.float().cpu().numpy().astype(np.float64)
                x64 = bf16_to_f64(x.view(torch.int16).numpy().view(np.uint16))
                ref = x64 @ w64.T
                weights_rounded = 2.0 ** -9 if rows > 16 else 0.0
                bound = ((k + 64) * 2.0 ** -22 + weights_rounded) * (np.abs(x64) @ np.abs(w64).T) + 2.0 ** -8 * np.abs(ref) + 1e-30
                worst = np.max(np.abs(y - ref) / bound)
                assert worst <= 1.0, f"{name} rows {rows} via {how}: {worst:.3g} of the bound"
        checked += 1
    assert checked > 0


@pytest.mark.parametrize("archive", [("llama-bf16", ("--quant", "nf4")), ("llama-bf16", ("--quant", "mxfp4")),
                                     ("llama-bf16", ("--quant", "fp8-block")), ("llama-nf4-dq", ()), ("llama-fp8-block", ())])
def test_patched_llama_generates_what_its_dequantized_twin_generates(converted, tmp_path, archive):
    transformers = pytest.importorskip("transformers")
    path = converted(*archive[:1], *archive[1])
    export = tmp_path / "dequantized.safetensors"
    run_iris("export", path, "-o", export, "--dtype", "bf16", "-q")
    src = FIXTURES / "llama-bf16"

    def fresh():
        return _from_pretrained(transformers, src)

    reference = fresh()
    _fill_from_export(reference, export)
    patched = fresh()
    keep = itorch.patch(patched, path)
    n_iris = sum(isinstance(m, itorch.IrisLinear) for m in patched.modules())
    assert n_iris > 0
    prompts = torch.tensor([[1, 15, 27, 8, 99, 3, 42, 7], [1, 200, 5, 61, 17, 33, 2, 90]], device="cuda")
    mask = torch.ones_like(prompts)  # equal lengths, no padding
    with torch.no_grad():
        ref_logits = reference(prompts, attention_mask=mask).logits.float()
        got_logits = patched(prompts, attention_mask=mask).logits.float()
        diff = (ref_logits - got_logits).abs().max().item()
        scale = ref_logits.abs().max().item()
        ref_gen = reference.generate(prompts, attention_mask=mask, max_new_tokens=32, do_sample=False, pad_token_id=0)
        got_gen = patched.generate(prompts, attention_mask=mask, max_new_tokens=32, do_sample=False, pad_token_id=0)
    # What a user wants to know before shipping a format: how far the quantized model is from
    # the unquantized source (reported, not gated).
    with torch.no_grad():
        src_logits = fresh()(prompts, attention_mask=mask).logits.float()
    rel = ((got_logits - src_logits).norm() / src_logits.norm()).item()
    print(f"{archive}: {n_iris} IrisLinear, max |logit diff| vs dequantized twin {diff:.3g} (logits up to {scale:.3g}); "
          f"relative logit error vs the BF16 source {rel:.4f}")
    assert torch.equal(ref_gen, got_gen), f"greedy continuations differ ({archive})"
    assert diff <= 0.05 * scale
    del keep


def test_patched_qwen2_with_attention_biases(converted, tmp_path):
    """A Qwen2-shaped model (biases on q/k/v: IrisLinear's bias path), built here with
    transformers' own config class and random weights, saved, converted to nf4."""
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.Qwen2Config(vocab_size=512, hidden_size=256, intermediate_size=512, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128)
    src = tmp_path / "qwen2"
    _save_random(transformers.Qwen2ForCausalLM, config, src, 0.02)
    archive = tmp_path / "qwen2-nf4.iris"
    run_iris("convert", src, "-o", archive, "--quant", "nf4", "-q")
    export = tmp_path / "dequantized.safetensors"
    run_iris("export", archive, "-o", export, "--dtype", "bf16", "-q")

    def fresh():
        return _from_pretrained(transformers, src)

    reference = fresh()
    _fill_from_export(reference, export)
    patched = fresh()
    keep = itorch.patch(patched, archive)
    linears = [m for m in patched.modules() if isinstance(m, itorch.IrisLinear)]
    assert len(linears) == 14 and sum(m.bias is not None for m in linears) == 6  # q, k, v of 2 layers
    prompts = torch.tensor([[3, 14, 15, 92, 65, 35, 89, 79]], device="cuda")
    mask = torch.ones_like(prompts)
    with torch.no_grad():
        ref_gen = reference.generate(prompts, attention_mask=mask, max_new_tokens=32, do_sample=False, pad_token_id=0)
        got_gen = patched.generate(prompts, attention_mask=mask, max_new_tokens=32, do_sample=False, pad_token_id=0)
        diff = (reference(prompts).logits.float() - patched(prompts).logits.float()).abs().max().item()
    print(f"qwen2 nf4: {len(linears)} IrisLinear, max |logit diff| {diff:.3g}")
    assert torch.equal(ref_gen, got_gen)
    del keep


def _greedy(model, prompts):
    mask = torch.ones_like(prompts)
    with torch.no_grad():
        return model.generate(prompts, attention_mask=mask, max_new_tokens=32, do_sample=False, pad_token_id=0), \
            model(prompts, attention_mask=mask).logits.float()


def test_patched_gpt_oss_runs_its_mxfp4_experts_on_iris(converted, tmp_path):
    """gpt-oss with its MXFP4 expert stacks kept (IrisGptOssExperts: a GEMV per picked expert
    over that expert's tiles) against the same model holding `iris export --dtype bf16`."""
    transformers = pytest.importorskip("transformers")
    path = converted("gptoss-mxfp4")
    export = tmp_path / "dequantized.safetensors"
    run_iris("export", path, "-o", export, "--dtype", "bf16", "-q")
    config = transformers.AutoConfig.from_pretrained(FIXTURES / "gptoss-mxfp4")
    if hasattr(config, "quantization_config"):
        del config.quantization_config  # built unquantized; the weights come from iris

    def build():
        torch.manual_seed(0)  # the same initial values in both: nothing left to chance
        return transformers.AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16).to("cuda").eval()

    twin = build()
    filled = _fill_from_export(twin, export)
    assert filled >= len(read_safetensors(export)) - 1
    patched = build()
    keep = itorch.patch(patched, path)
    n_experts = sum(isinstance(m, itorch.IrisGptOssExperts) for m in patched.modules())
    assert n_experts == config.num_hidden_layers
    prompts = torch.tensor([[1, 15, 27, 8, 99, 3, 42, 7]], device="cuda")
    ref_gen, ref_logits = _greedy(twin, prompts)
    got_gen, got_logits = _greedy(patched, prompts)
    diff = (ref_logits - got_logits).abs().max().item()
    print(f"gpt-oss mxfp4: {n_experts} IrisGptOssExperts, max |logit diff| vs dequantized twin {diff:.3g}")
    assert torch.equal(ref_gen, got_gen)
    del keep


def test_patched_mixtral_runs_its_nf4_experts_on_iris(converted, tmp_path):
    """A Mixtral-shaped model built with transformers' config class and random weights, saved,
    converted to nf4 (per-expert w1/w2/w3 as the checkpoint stores them)."""
    transformers = pytest.importorskip("transformers")
    import shutil

    torch.manual_seed(0)
    # A small vocabulary: with random weights, logits over a large one are nearly flat, and greedy
    # decoding then turns on near-ties that any rounding difference flips.
    config = transformers.MixtralConfig(vocab_size=64, hidden_size=256, intermediate_size=512, num_hidden_layers=2,
                                        num_attention_heads=4, num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2,
                                        max_position_embeddings=128)
    src = tmp_path / "mixtral"
    _save_random(transformers.MixtralForCausalLM, config, src, 0.05)
    archive = tmp_path / "mixtral-nf4.iris"
    run_iris("convert", src, "-o", archive, "--quant", "nf4", "-q")
    twin_dir = tmp_path / "twin"
    twin_dir.mkdir()
    shutil.copy(src / "config.json", twin_dir / "config.json")
    run_iris("export", archive, "-o", twin_dir / "model.safetensors", "--dtype", "bf16", "-q")
    twin = _from_pretrained(transformers, twin_dir)
    patched = _from_pretrained(transformers, src)
    keep = itorch.patch(patched, archive)
    n_experts = sum(isinstance(m, itorch.IrisMixtralExperts) for m in patched.modules())
    assert n_experts == 2
    prompts = torch.tensor([[3, 14, 15, 52, 61, 35, 9, 7]], device="cuda")
    ref_gen, ref_logits = _greedy(twin, prompts)
    got_gen, got_logits = _greedy(patched, prompts)
    diff = (ref_logits - got_logits).abs().max().item()
    print(f"mixtral nf4: {n_experts} IrisMixtralExperts, max |logit diff| vs dequantized twin {diff:.3g} "
          f"(logits up to {ref_logits.abs().max().item():.3g})")
    assert torch.equal(ref_gen, got_gen)
    del keep
