"""Decode step of a transformers Llama on iris modules vs the same model in BF16 on cuBLAS,
batch 1, per format, same run. The model is built here (transformers' LlamaConfig, random
N(0, 0.02) weights) at a 7B-like width with few layers, saved, and converted by `iris`.

    python3 bench/torch_decode_bench.py IRIS_BINARY WORKDIR [LAYERS=4]

Prints JSON: median milliseconds per generated token (128 steps after an 8-token prompt, each
model warmed up by one such run first; the BF16 baseline measured before and after)."""

import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch
import transformers

import iris_archive.torch as itorch


def step_ms(model, steps=128):
    ids = torch.tensor([[1, 15, 27, 8, 99, 3, 42, 7]], device="cuda")
    with torch.no_grad():
        out = model(ids, use_cache=True)
        past, nxt = out.past_key_values, out.logits[:, -1:].argmax(-1)
        times = []
        for _ in range(steps):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            out = model(nxt, past_key_values=past, use_cache=True)
            past, nxt = out.past_key_values, out.logits[:, -1:].argmax(-1)
            torch.cuda.synchronize()
            times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def main():
    iris_bin, work = sys.argv[1], Path(sys.argv[2])
    layers = int(sys.argv[3]) if len(sys.argv) > 3 else 4
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(hidden_size=4096, intermediate_size=14336, num_hidden_layers=layers, num_attention_heads=32,
                                   num_key_value_heads=8, vocab_size=32000, max_position_embeddings=512)
    snap = work / "llama-wide"
    with torch.device("cuda"):
        model = transformers.LlamaForCausalLM(cfg).to(torch.bfloat16)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.02)
    model.save_pretrained(snap)
    del model
    torch.cuda.empty_cache()

    def load():  # the BF16 baseline and the patched models are loaded the same way
        return transformers.LlamaForCausalLM.from_pretrained(snap, dtype=torch.bfloat16).to("cuda").eval()

    baseline = load()
    step_ms(baseline)  # warm-up: cuBLAS heuristics, lazy kernel loading (the first run is much slower)
    result = {"layers": layers, "hidden": 4096, "intermediate": 14336, "bf16_cublas_ms_before": step_ms(baseline)}
    for q in ("mxfp4", "nf4", "fp8-block", "fp8-channel"):
        archive = work / f"{q}.iris"
        subprocess.run([iris_bin, "convert", str(snap), "-o", str(archive), "--quant", q, "-q", "--force"], check=True)
        m = load()
        keep = itorch.patch(m, archive)
        step_ms(m)  # warm-up
        result[f"{q}_iris_ms"] = step_ms(m)
        del m, keep
        torch.cuda.empty_cache()
    # The baseline again after the formats, so that drift between them shows.
    result["bf16_cublas_ms_after"] = step_ms(baseline)
    base = (result["bf16_cublas_ms_before"] + result["bf16_cublas_ms_after"]) / 2
    for q in ("mxfp4", "nf4", "fp8-block", "fp8-channel"):
        result[f"{q}_speedup_vs_bf16"] = base / result[f"{q}_iris_ms"]
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
