"""bitsandbytes LLM.int8 on the GPU through libiris (skipped, saying why, without torch, CUDA or
libiris with CUDA). The fixtures' dequantization and linear are checked with the other
int_group fixtures in test_int_group_gpu.py; here the whole model: transformers' Llama patched
with iris.torch on the archive of bitsandbytes' own full checkpoint (the maker's output,
bench/llm_int8_gpu_session.sh; the repository keeps layer 0 only) against the same model
holding the weights `iris export --dtype bf16` wrote -- greedy continuations identical, logits
within test_torch_gpu.py's propagated bound -- and, for the record, against transformers
running the checkpoint with bitsandbytes' own int8 matmul (printed, not gated: it quantizes the
activations too)."""

import importlib.util
import os
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device here; these run on the GPU machine (bench/llm_int8_gpu_session.sh)", allow_module_level=True)

from iris_archive import _native  # noqa: E402

if _native.library() is None:
    pytest.skip(f"libiris not found: {_native.why_not()}", allow_module_level=True)

from conftest import run_iris  # noqa: E402
from test_torch_gpu import LLAMA_PROMPTS, _compare, llama_and_its_twin  # noqa: E402

SNAPSHOTS = os.environ.get("IRIS_BNB_INT8_SNAPSHOTS")


def test_patched_llama_int8_generates_what_its_dequantized_twin_generates(tmp_path):
    if not SNAPSHOTS:
        pytest.skip("needs bitsandbytes' full LLM.int8 snapshot: IRIS_BNB_INT8_SNAPSHOTS, as bench/llm_int8_gpu_session.sh sets it")
    transformers = pytest.importorskip("transformers")
    snap = Path(SNAPSHOTS) / "llama-bnb-int8"
    archive = tmp_path / "int8.iris"
    run_iris("convert", snap, "-o", archive, "-q")
    # (llama-bf16 is the checkpoint bitsandbytes quantized: the int8 one's other tensors are its)
    reference, patched, keep, n_iris, _ = llama_and_its_twin(transformers, archive, tmp_path)
    assert n_iris == 14  # every linear of both layers but lm_head
    prompts = torch.tensor(LLAMA_PROMPTS, device="cuda")
    # (a tiny model of random weights: its logits nearly tie, so tokens are compared where decisive)
    _compare(f"llama-bnb-int8: {n_iris} IrisLinear (int_group, post factor 1/127)", reference, patched, prompts, decisive_only=True)
    if importlib.util.find_spec("bitsandbytes") is None:
        print("bitsandbytes not importable: its own int8 matmul not compared")
    else:
        native = transformers.AutoModelForCausalLM.from_pretrained(snap, device_map={"": 0}).eval()
        with torch.no_grad():
            a = native(prompts).logits.float()
            b = patched(prompts).logits.float()
        print(f"llama-bnb-int8: bitsandbytes' own int8 matmul against iris: max |logit diff| {(a - b).abs().max().item():.3g}, "
              f"relative {((a - b).norm() / a.norm()).item():.4f}, top-1 agreement {(a.argmax(-1) == b.argmax(-1)).float().mean().item():.2f}")
    del keep
