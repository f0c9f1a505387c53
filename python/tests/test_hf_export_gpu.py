"""`iris export ARCHIVE -o DIR/` writes a folder transformers loads as the quantized model it is
(GPU; skipped, saying why, without torch, CUDA, transformers, or bitsandbytes for NF4):

- round trips: the bitsandbytes NF4 snapshot, the FineGrained FP8 one and the gpt-oss MXFP4 one,
  converted and exported to a folder: `from_pretrained` of the folder gives logits equal bit for
  bit to `from_pretrained` of the original snapshot (the same bytes reach the same kernels).
  FP8 and MXFP4 load with `dequantize=True` on both sides: transformers' FP8 forward needs the
  optional `kernels` package, which the GPU machine lacks (no network), and the comparison is of
  the files, not of optional kernels;
- requantized archives (llama-bf16 `--quant nf4` and `--quant fp8-block`): every quantized
  module transformers built from the folder dequantizes, by the library's own arithmetic
  (bitsandbytes' `dequantize_4bit` to BF16; FP8 weight times its block's `weight_scale_inv` in
  F32), to exactly the values `iris export --dtype bf16|f32` writes;
- and the NF4 one gives logits equal bit for bit to transformers + bitsandbytes quantizing the
  BF16 checkpoint itself on load (NF4, double quant, BF16 compute): iris's encoder writes
  bitsandbytes' bytes (tests/quant/encode_fixtures_test.cpp), so the same kernels see the same
  weights. (Not FP8: transformers' on-load FP8 quantizer first casts the weights to E4M3
  unscaled, see tests/data/fixtures/README.md, so its bytes differ from any exact encoder's.)

bench/gpu_run.sh runs this file after bitsandbytes is built (its peers section)."""

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device here; these run on the GPU machine (bench/gpu_run.sh)", allow_module_level=True)
transformers = pytest.importorskip("transformers")

from conftest import FIXTURES, read_safetensors, run_iris  # noqa: E402

PROMPTS = [[1, 15, 27, 8, 99, 3, 42, 7], [1, 200, 5, 61, 17, 33, 2, 90]]  # 2 x 8 tokens, vocab 512


def _needs_bitsandbytes(fixture_or_quant):
    if "nf4" in fixture_or_quant:
        pytest.importorskip("bitsandbytes", reason="bitsandbytes is not importable here (the GPU run builds it from source)")


def _load(path, dequantize_on_load=None, quantization_config=None):
    """`dequantize_on_load` = "mxfp4" or "fp8": the weights are dequantized to BF16 as they load
    (see the module docstring)."""
    kwargs = {"dtype": torch.bfloat16, "device_map": "cuda"}
    if dequantize_on_load == "mxfp4":
        kwargs["quantization_config"] = transformers.Mxfp4Config(dequantize=True)
    elif dequantize_on_load == "fp8":
        kwargs["quantization_config"] = transformers.FineGrainedFP8Config(dequantize=True)
    elif quantization_config is not None:
        kwargs["quantization_config"] = quantization_config
    return transformers.AutoModelForCausalLM.from_pretrained(str(path), **kwargs).eval()


def _logits(model):
    with torch.no_grad():
        return model(torch.tensor(PROMPTS, device="cuda")).logits.float().cpu()


def _export_folder(archive, tmp_path):
    folder = tmp_path / "exported"
    run_iris("export", archive, "-o", f"{folder}/", "-q")
    return folder


@pytest.mark.parametrize("fixture", ["llama-nf4-dq", "llama-fp8-block", "gptoss-mxfp4"])
def test_exported_folder_gives_the_logits_of_the_original_checkpoint(converted, tmp_path, fixture):
    _needs_bitsandbytes(fixture)
    folder = _export_folder(converted(fixture), tmp_path)
    config = json.loads((folder / "config.json").read_text())
    assert config["quantization_config"]["quant_method"] == json.loads((FIXTURES / fixture / "config.json").read_text())[
        "quantization_config"]["quant_method"]
    on_load = {"gptoss-mxfp4": "mxfp4", "llama-fp8-block": "fp8"}.get(fixture)
    original = _logits(_load(FIXTURES / fixture, on_load))
    exported = _logits(_load(folder, on_load))
    assert torch.isfinite(original).all()
    diff = (exported - original).abs().max().item()
    print(f"{fixture}: exported folder vs original checkpoint, max |logit diff| {diff} (logits up to {original.abs().max().item():.3g})")
    assert torch.equal(exported, original)


def _dequantized_by_transformers(model):
    """name -> F32 [N, K] of every quantized Linear, by the quantization library's arithmetic."""
    out = {}
    for name, m in model.named_modules():
        w = getattr(m, "weight", None)
        if w is None:
            continue
        if hasattr(w, "quant_state") and w.quant_state is not None:  # bitsandbytes Params4bit
            import bitsandbytes.functional as bnbf

            out[name + ".weight"] = bnbf.dequantize_4bit(w.data, w.quant_state).float().cpu()
        elif w.dtype == torch.float8_e4m3fn:
            s = m.weight_scale_inv.float()
            n, k = w.shape
            bn, bk = (-(-n // s.shape[0])), (-(-k // s.shape[1]))
            full = s.repeat_interleave(bn, 0)[:n].repeat_interleave(bk, 1)[:, :k]
            out[name + ".weight"] = (w.float() * full).cpu()
    return out


@pytest.mark.parametrize("quant", ["nf4", "fp8-block"])
def test_requantized_folder_holds_the_archives_values_in_transformers(converted, tmp_path, quant):
    _needs_bitsandbytes(quant)
    archive = converted("llama-bf16", "--quant", quant)
    folder = _export_folder(archive, tmp_path)
    # bitsandbytes dequantizes to the compute dtype (BF16), FP8 here in F32: compare each with the
    # archive exported in that dtype.
    dtype = "bf16" if quant == "nf4" else "f32"
    values_file = tmp_path / f"dequantized-{dtype}.safetensors"
    run_iris("export", archive, "-o", values_file, "--dtype", dtype, "-q")
    expected = read_safetensors(values_file)
    model = _load(folder)
    got = _dequantized_by_transformers(model)
    assert got, f"transformers built no quantized module from the {quant} folder"
    for name, values in got.items():
        assert name in expected, name
        raw = np.array(expected[name])  # a writable copy for torch
        if raw.dtype == np.uint16:  # BF16 bits
            raw = (raw.astype(np.uint32) << 16).view(np.float32)
        want = torch.from_numpy(raw).reshape(values.shape)
        assert torch.equal(values, want), f"{name}: max |diff| {(values - want).abs().max().item()}"
    print(f"llama-bf16 --quant {quant}: {len(got)} quantized modules in transformers equal the archive's values")
    if quant != "nf4":
        return
    bnb_config = transformers.BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True,
                                                 bnb_4bit_compute_dtype=torch.bfloat16)
    quantized_on_load = _logits(_load(FIXTURES / "llama-bf16", quantization_config=bnb_config))
    exported = _logits(model)
    print(f"llama-bf16 --quant nf4: folder vs bitsandbytes quantizing llama-bf16 on load, max |logit diff| "
          f"{(exported - quantized_on_load).abs().max().item()}")
    assert torch.equal(exported, quantized_on_load)
