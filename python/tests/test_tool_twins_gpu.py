"""Each producing tool's own full checkpoint, served by iris on the GPU, against its twin
(skipped, saying why, without torch, CUDA, libiris with CUDA, or the makers' output).

The repository keeps the tools' fixtures cut to layer 0 (tests/data/fixtures/README*.md); the
GPU session regenerates them whole with the makers (bench/tool_twins_gpu_session.sh: GPTQModel,
AutoAWQ, compressed-tensors + llm-compressor, ModelOpt, bitsandbytes + transformers) and points
IRIS_TOOL_SNAPSHOTS at them. Every Llama there was quantized from tests/data/fixtures/llama-bf16,
so its unquantized tensors are that model's: transformers' Llama patched with iris.torch on the
archive of the tool's checkpoint, converted as stored, against the same model holding the
weights `iris export --dtype bf16` wrote -- logits within test_torch_gpu.py's propagated bound,
the next tokens equal where the twin's top two are decisively apart. For LLM.int8, transformers
running the checkpoint with bitsandbytes' own int8 matmul is printed beside it, not gated (it
quantizes the activations too)."""

import importlib.util
import json
import os
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device here; these run on the GPU machine (bench/tool_twins_gpu_session.sh)", allow_module_level=True)

from iris_archive import _native  # noqa: E402

if _native.library() is None:
    pytest.skip(f"libiris not found: {_native.why_not()}", allow_module_level=True)

from conftest import run_iris  # noqa: E402
from test_torch_gpu import LLAMA_PROMPTS, _compare, llama_and_its_twin  # noqa: E402

SNAPSHOTS = os.environ.get("IRIS_TOOL_SNAPSHOTS")
LLAMAS = sorted(p.name for p in Path(SNAPSHOTS).iterdir() if p.name.startswith("llama-") and (p / "config.json").exists()) if SNAPSHOTS else []


def test_the_makers_wrote_snapshots():
    if not SNAPSHOTS:
        pytest.skip("needs the tools' full checkpoints: IRIS_TOOL_SNAPSHOTS, as bench/tool_twins_gpu_session.sh sets it")
    assert LLAMAS, f"no llama-* checkpoint under {SNAPSHOTS}"


@pytest.mark.parametrize("name", LLAMAS)
def test_tool_checkpoint_patched_is_its_dequantized_twin(tmp_path, name):
    transformers = pytest.importorskip("transformers")
    snap = Path(SNAPSHOTS) / name
    assert json.loads((snap / "config.json").read_text())["num_hidden_layers"] == 2
    archive = tmp_path / "tool.iris"
    run_iris("convert", snap, "-o", archive, "-q")
    reference, patched, keep, n_iris, _ = llama_and_its_twin(transformers, archive, tmp_path)
    assert n_iris == 14, f"{name}: {n_iris} IrisLinear (every linear of both layers but lm_head is quantized)"
    # (16 positions: the fused GEMV's rows; 32 would take dequantization + cuBLAS, the twin's own
    # arithmetic.) A tiny model of random weights: its logits nearly tie, so tokens are compared
    # where decisive, a quarter of the positions at least -- the act-order compressed-tensors
    # Llama had 7 of 16 decisive, 2026-11-30.
    prompts = torch.tensor(LLAMA_PROMPTS, device="cuda")
    _compare(f"{name}: {n_iris} IrisLinear", reference, patched, prompts, decisive_only=True, min_decisive=0.25)
    if "bnb-int8" in name and importlib.util.find_spec("bitsandbytes") is not None:
        native = transformers.AutoModelForCausalLM.from_pretrained(snap, device_map={"": 0}).eval()
        with torch.no_grad():
            a = native(prompts).logits.float()
            b = patched(prompts).logits.float()
        print(f"{name}: bitsandbytes' own int8 matmul against iris: max |logit diff| {(a - b).abs().max().item():.3g}, "
              f"relative {((a - b).norm() / a.norm()).item():.4f}, top-1 agreement {(a.argmax(-1) == b.argmax(-1)).float().mean().item():.2f}")
    del keep
