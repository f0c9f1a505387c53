#!/usr/bin/env python3
"""Write a ModelOpt NVFP4 fixture (unified Hugging Face checkpoint) with the tool's own code.

Every number comes from the unmodified source of NVIDIA/TensorRT-Model-Optimizer:
NVFP4QTensor (modelopt/torch/quantization/qtensor/nvfp4_tensor.py: get_weights_scaling_factor,
get_weights_scaling_factor_2_from_quantizer, quantize, dequantize), BaseQuantizedTensor
(qtensor/base_qtensor.py) and the reductions it calls (quantization/utils.py: reduce_amax,
reduce_block_amax, reduce_block_padding), driven as modelopt/torch/export/unified_export_hf.py
and quant_utils.py drive them for a QUANTIZATION_NVFP4 linear layer:

  amax            = the max calibrator's weight amax, shared by the projections that read one
                    input (quant_utils.preprocess_linear_fusion: q/k/v, gate/up)
  weight_scale_2  = NVFP4QTensor.get_weights_scaling_factor_2_from_quantizer  (amax / (6 * 448))
  weight_scale    = NVFP4QTensor.get_weights_scaling_factor(weight, 16, weight_scale_2)[0]
  weight          = NVFP4QTensor.quantize(weight, 16, weight_scale, weight_scale_2)[0]._quantized_data

The reference is NVFP4QTensor.dequantize(dtype=bfloat16, scale=weight_scale,
double_scale=weight_scale_2, block_sizes={-1: 16}) of the written tensors.

What is not the tool's code: ModelOpt's package imports far more than these files need (FSDP,
its plugin registry), so the three source files are loaded by hand: the functions and the class
named above are taken from them verbatim (Python's ast) into stand-in modules, and
`backends.utils.fp4_compatible` is a stand-in returning False -- the tool's own path on a GPU
without FP4 tensor cores (an H100/H200), which never calls TensorRT-LLM. No calibration data:
the max calibrator's weight amax is the weight's own max |w|, as ModelOpt computes it.
Needs torch with float8_e4m3fn (>= 2.1): run on the GPU machine's torch.

  python3 tests/fixture_makers/modelopt_nvfp4.py --tool-src MODELOPT_REPO [--out-fixtures DIR --out-refs DIR]
then tests/fixture_makers/trim_fixture.py on the fixture and its reference.
"""

import argparse
import ast
import json
import os
import shutil
import struct
import sys
import types

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from torch_safetensors import write_safetensors  # noqa: E402
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
NAME = "llama-modelopt-nvfp4"
FUSED = [("q_proj", "k_proj", "v_proj"), ("gate_proj", "up_proj")]
# The reference's weights (kept small: the fixture's every weight is checked against this arithmetic
# through --quant nvfp4's bytes too): a fused projection with a shared global scale, and one without.
REF_SUBSET = ["model.layers.0.self_attn.k_proj.weight", "model.layers.0.mlp.down_proj.weight"]
LINEARS = ["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj", "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"]


def verbatim(path, names, namespace):
    """Executes the top-level definitions `names` of the file at `path`, as written, in `namespace`."""
    src = open(path).read()
    tree = ast.parse(src)
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name in names:
            code = ast.get_source_segment(src, node)
            decorators = "".join("@" + ast.get_source_segment(src, d) + "\n" for d in node.decorator_list)
            exec(compile(decorators + code, path, "exec"), namespace)
    missing = [n for n in names if n not in namespace]
    if missing:
        raise SystemExit(f"{path}: {missing} not found")


def load_tool(tool_src):
    import torch
    import torch.nn.functional as F

    q = os.path.join(tool_src, "modelopt", "torch", "quantization")
    pkg = "modelopt.torch.quantization"
    for name in ["modelopt", "modelopt.torch", pkg, pkg + ".qtensor", pkg + ".backends"]:
        m = types.ModuleType(name)
        m.__path__ = []
        sys.modules[name] = m
    utils = types.ModuleType(pkg + ".utils")
    utils.__dict__.update(torch=torch, F=F)
    verbatim(os.path.join(q, "utils.py"), ["reduce_amax", "reduce_block_amax", "reduce_block_padding"], utils.__dict__)
    sys.modules[pkg + ".utils"] = utils
    backends = types.ModuleType(pkg + ".backends.utils")
    backends.fp4_compatible = lambda: False  # stand-in: no FP4 tensor cores (H100 / H200)
    sys.modules[pkg + ".backends.utils"] = backends
    base = types.ModuleType(pkg + ".qtensor.base_qtensor")
    import enum

    base.__dict__.update(torch=torch, enum=enum)
    verbatim(os.path.join(q, "qtensor", "base_qtensor.py"), ["QTensorType", "BaseQuantizedTensor"], base.__dict__)
    sys.modules[pkg + ".qtensor.base_qtensor"] = base
    path = os.path.join(q, "qtensor", "nvfp4_tensor.py")
    mod = types.ModuleType(pkg + ".qtensor.nvfp4_tensor")
    mod.__package__ = pkg + ".qtensor"
    mod.__file__ = path
    sys.modules[mod.__name__] = mod
    exec(compile(open(path).read(), path, "exec"), mod.__dict__)
    return mod.NVFP4QTensor


def read_safetensors(path):
    import torch

    data = open(path, "rb").read()
    (n,) = struct.unpack_from("<Q", data, 0)
    header = json.loads(data[8:8 + n])
    out = {}
    for name, h in header.items():
        if name == "__metadata__":
            continue
        b, e = h["data_offsets"]
        raw = np.frombuffer(data[8 + n + b:8 + n + e], dtype=np.uint8).copy()
        t = torch.from_numpy(raw)
        t = {"BF16": lambda: t.view(torch.bfloat16), "F32": lambda: t.view(torch.float32), "U8": lambda: t}[h["dtype"]]()
        out[name] = t.reshape(h["shape"])
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tool-src", required=True, help="TensorRT-Model-Optimizer source tree (repo root)")
    ap.add_argument("--source-llama", default=os.path.join(REPO, "tests", "data", "fixtures", "llama-bf16"))
    ap.add_argument("--out-fixtures", default=os.path.join(REPO, "tests", "data", "fixtures"))
    ap.add_argument("--out-refs", default=os.path.join(REPO, "tests", "data", "fixtures", "refs"))
    ap.add_argument("--tool-version", default="0.39.0", help="the producer version the config records")
    args = ap.parse_args()
    import torch

    NVFP4QTensor = load_tool(args.tool_src)
    sd = {}
    for f in sorted(os.listdir(args.source_llama)):
        if f.endswith(".safetensors"):
            sd.update(read_safetensors(os.path.join(args.source_llama, f)))
    cfg = json.load(open(os.path.join(args.source_llama, "config.json")))
    layers = cfg["num_hidden_layers"]
    out, refs = {}, {}
    for layer in range(layers):
        prefix = f"model.layers.{layer}."
        amax = {p: sd[prefix + p + ".weight"].abs().amax().float() for p in LINEARS}  # the max calibrator's weight amax
        for group in FUSED:  # preprocess_linear_fusion: one amax, the largest, for modules sharing an input
            members = [p for p in LINEARS if p.split(".")[-1] in group]
            shared = torch.max(torch.stack([amax[p] for p in members]))
            for p in members:
                amax[p] = shared
        for p in LINEARS:
            w = sd[prefix + p + ".weight"]

            class Quantizer:  # what get_weights_scaling_factor_2_from_quantizer reads
                _amax = amax[p]

            s2 = NVFP4QTensor.get_weights_scaling_factor_2_from_quantizer(Quantizer)
            s = NVFP4QTensor.get_weights_scaling_factor(w, 16, s2)[0]
            qt = NVFP4QTensor.quantize(w, 16, s, s2)[0]
            name = prefix + p
            out[name + ".weight"] = qt._quantized_data
            out[name + ".weight_scale"] = s
            out[name + ".weight_scale_2"] = s2
            if name + ".weight" in REF_SUBSET:
                refs[name + ".weight"] = qt.dequantize(dtype=torch.bfloat16, scale=s, double_scale=s2, block_sizes={-1: 16})
    for k, v in sd.items():
        if not any(f".{p}.weight" in k for p in LINEARS):
            out[k] = v  # embeddings, norms, lm_head: kept (ModelOpt excludes lm_head by default)
    folder = os.path.join(args.out_fixtures, NAME)
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    write_safetensors(os.path.join(folder, "model.safetensors"), out, {"format": "pt"})
    quant = {"quant_algo": "NVFP4", "kv_cache_quant_algo": None, "group_size": 16, "exclude_modules": ["lm_head"]}
    producer = {"name": "modelopt", "version": args.tool_version}
    with open(os.path.join(folder, "hf_quant_config.json"), "w") as f:
        json.dump({"producer": producer, "quantization": quant}, f, indent=4)
    cfg["quantization_config"] = {**quant, "quant_method": "modelopt", "producer": producer}
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    shutil.copyfile(os.path.join(args.source_llama, "generation_config.json"), os.path.join(folder, "generation_config.json"))
    os.makedirs(args.out_refs, exist_ok=True)
    ref_path = os.path.join(args.out_refs, NAME + ".dequant.modelopt.safetensors")
    write_safetensors(ref_path, refs, {"format": "pt"})
    print(json.dumps({"fixture": folder, "reference": ref_path, "weights": len(refs), "torch": torch.__version__}))


if __name__ == "__main__":
    main()
