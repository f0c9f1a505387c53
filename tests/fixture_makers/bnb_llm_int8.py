#!/usr/bin/env python3
"""Write bitsandbytes LLM.int8 fixtures with the tools themselves.

Two snapshots and their dequantized references, every number from bitsandbytes (its public
source built on the GPU machine: `int8_vectorwise_quant`'s CUDA kernel, called by
`Int8Params` when a Linear8bitLt moves to the GPU) and the serialization from
`Linear8bitLt._save_to_state_dict` (`weight` I8, `SCB` F32, `weight_format` U8):

* llama-bnb-int8: the BF16 Llama (tests/data/fixtures/llama-bf16) loaded by transformers with
  `BitsAndBytesConfig(load_in_8bit=True)` and written by `save_pretrained` -- the path users
  take. If transformers refuses to quantize here (it wants accelerate), the same modules are
  made by hand as transformers' `replace_with_bnb_linear` makes them (every nn.Linear but
  lm_head, threshold 6.0, has_fp16_weights False) and the state dict is written as
  save_pretrained writes it; `path` in the printed JSON says which ran.
* moe-bnb-int8: a tiny Mixtral in the per-expert layout transformers 4.x checkpoints on the
  Hub have (`block_sparse_moe.experts.E.w1/w2/w3`, the router `block_sparse_moe.gate`), every
  Linear but lm_head a Linear8bitLt, its state dict written as above. Its experts are
  128 wide (MOE_INTERMEDIATE), so that layer 0 stays small in the repository.

References: `bitsandbytes.functional.int8_vectorwise_dequant(weight, SCB)` (F32 [N, K]) of layer
0's k_proj (Llama) and the router and expert 1's w1 (MoE), on the GPU.

  PYTHONPATH=.peer/bnb-src python3 tests/fixture_makers/bnb_llm_int8.py [--out-fixtures D] [--out-refs D]
"""

import argparse
import json
import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from torch_safetensors import write_safetensors  # noqa: E402
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
LLAMA, MOE = "llama-bnb-int8", "moe-bnb-int8"
MOE_INTERMEDIATE = 128


def int8_modules(model):
    import bitsandbytes as bnb

    return {name: m for name, m in model.named_modules() if isinstance(m, bnb.nn.Linear8bitLt)}


def replace_linears(model, skip=("lm_head",)):
    """Every nn.Linear but `skip` as a Linear8bitLt holding the same BF16 weight (on the CPU:
    moving it to the GPU quantizes it), as transformers' replace_with_bnb_linear does."""
    import bitsandbytes as bnb
    import torch

    for name, module in list(model.named_modules()):
        for child_name, child in list(module.named_children()):
            if not isinstance(child, torch.nn.Linear) or child_name in skip:
                continue
            q = bnb.nn.Linear8bitLt(child.in_features, child.out_features, bias=child.bias is not None,
                                    has_fp16_weights=False, threshold=6.0)
            q.weight = bnb.nn.Int8Params(child.weight.data.clone(), requires_grad=False, has_fp16_weights=False)
            if child.bias is not None:
                q.bias = torch.nn.Parameter(child.bias.data.clone(), requires_grad=False)
            setattr(module, child_name, q)
    return model


def bnb_config_dict():
    from transformers import BitsAndBytesConfig

    return BitsAndBytesConfig(load_in_8bit=True).to_dict()


def save_state_dict(model, folder, cfg):
    """The state dict (Linear8bitLt's weight, SCB, weight_format) as save_pretrained writes it."""
    sd = {k: v for k, v in model.state_dict().items()}
    write_safetensors(os.path.join(folder, "model.safetensors"), sd, {"format": "pt"})
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2, sort_keys=True)


def refs_of(model, wanted):
    import bitsandbytes as bnb

    out = {}
    for name, m in int8_modules(model).items():
        if name + ".weight" in wanted:
            cb, scb = m.weight.data, (m.weight.SCB if getattr(m.weight, "SCB", None) is not None else m.state.SCB)
            out[name + ".weight"] = bnb.functional.int8_vectorwise_dequant(cb, scb)
    return out


def make_llama(src, folder):
    import torch
    from transformers import AutoModelForCausalLM, BitsAndBytesConfig

    try:
        model = AutoModelForCausalLM.from_pretrained(src, quantization_config=BitsAndBytesConfig(load_in_8bit=True), device_map={"": 0})
        model.save_pretrained(folder)
        path = "transformers from_pretrained(load_in_8bit) + save_pretrained"
    except Exception as e:  # noqa: BLE001 -- recorded, then the hand-made path
        print(f"transformers path failed: {type(e).__name__}: {e}", file=sys.stderr)
        model = AutoModelForCausalLM.from_pretrained(src, dtype=torch.bfloat16)
        replace_linears(model).cuda()
        cfg = json.load(open(os.path.join(src, "config.json")))
        cfg["quantization_config"] = bnb_config_dict()
        os.makedirs(folder, exist_ok=True)
        save_state_dict(model, folder, cfg)
        path = "Linear8bitLt by hand + state_dict (transformers refused: " + type(e).__name__ + ")"
    shutil.copyfile(os.path.join(src, "generation_config.json"), os.path.join(folder, "generation_config.json"))
    return model, path


class Expert:
    pass


def make_moe(folder, cfg):
    import torch

    torch.manual_seed(20261130)
    h, inter, e = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_local_experts"]
    heads, kv, hd, vocab = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"], cfg["vocab_size"]

    def lin(i, o):
        m = torch.nn.Linear(i, o, bias=False, dtype=torch.bfloat16)
        torch.nn.init.normal_(m.weight, std=0.02)
        return m

    def norm():
        m = torch.nn.Module()
        m.weight = torch.nn.Parameter(torch.ones(h, dtype=torch.bfloat16))
        return m

    root = torch.nn.Module()
    model = torch.nn.Module()
    root.model = model
    model.embed_tokens = torch.nn.Embedding(vocab, h, dtype=torch.bfloat16)
    model.layers = torch.nn.ModuleList()
    for _ in range(cfg["num_hidden_layers"]):
        layer = torch.nn.Module()
        layer.input_layernorm, layer.post_attention_layernorm = norm(), norm()
        attn = torch.nn.Module()
        attn.q_proj, attn.k_proj, attn.v_proj, attn.o_proj = lin(h, heads * hd), lin(h, kv * hd), lin(h, kv * hd), lin(heads * hd, h)
        layer.self_attn = attn
        moe = torch.nn.Module()
        moe.gate = lin(h, e)
        moe.experts = torch.nn.ModuleList()
        for _ in range(e):
            x = torch.nn.Module()
            x.w1, x.w2, x.w3 = lin(h, inter), lin(inter, h), lin(h, inter)
            moe.experts.append(x)
        layer.block_sparse_moe = moe
        model.layers.append(layer)
    model.norm = norm()
    root.lm_head = lin(h, vocab)
    replace_linears(root).cuda()
    cfg = dict(cfg)
    cfg["quantization_config"] = bnb_config_dict()
    os.makedirs(folder, exist_ok=True)
    save_state_dict(root, folder, cfg)
    return root


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    fx = os.path.join(REPO, "tests", "data", "fixtures")
    ap.add_argument("--source-llama", default=os.path.join(fx, "llama-bf16"))
    ap.add_argument("--moe-config", default=os.path.join(fx, "moe-ct-nvfp4a16", "config.json"))
    ap.add_argument("--out-fixtures", default=fx)
    ap.add_argument("--out-refs", default=os.path.join(fx, "refs"))
    args = ap.parse_args()
    import bitsandbytes as bnb
    import torch
    import transformers

    report = {"torch": torch.__version__, "transformers": transformers.__version__, "bitsandbytes": bnb.__version__,
              "device": torch.cuda.get_device_name(0)}
    os.makedirs(args.out_refs, exist_ok=True)

    folder = os.path.join(args.out_fixtures, LLAMA)
    shutil.rmtree(folder, ignore_errors=True)
    model, report["llama_path"] = make_llama(args.source_llama, folder)
    refs = refs_of(model, {"model.layers.0.self_attn.k_proj.weight"})
    write_safetensors(os.path.join(args.out_refs, LLAMA + ".dequant.bnb.safetensors"), refs, {"format": "pt"})
    report["llama_refs"] = sorted(refs)

    cfg = json.load(open(args.moe_config))
    cfg.pop("quantization_config", None)
    cfg["intermediate_size"] = MOE_INTERMEDIATE
    folder = os.path.join(args.out_fixtures, MOE)
    shutil.rmtree(folder, ignore_errors=True)
    model = make_moe(folder, cfg)
    refs = refs_of(model, {"model.layers.0.block_sparse_moe.gate.weight", "model.layers.0.block_sparse_moe.experts.1.w1.weight"})
    write_safetensors(os.path.join(args.out_refs, MOE + ".dequant.bnb.safetensors"), refs, {"format": "pt"})
    report["moe_refs"] = sorted(refs)
    # The dequantization on the CPU too: the same default-backend torch arithmetic.
    cpu = {k: bnb.functional.int8_vectorwise_dequant(m.weight.data.cpu(), m.weight.SCB.cpu())
           for k, m in int8_modules(model).items() if getattr(m.weight, "SCB", None) is not None}
    gpu = {k: bnb.functional.int8_vectorwise_dequant(m.weight.data, m.weight.SCB).cpu()
           for k, m in int8_modules(model).items() if getattr(m.weight, "SCB", None) is not None}
    report["cpu_equals_gpu"] = all(torch.equal(cpu[k].view(torch.int32), gpu[k].view(torch.int32)) for k in cpu)
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
