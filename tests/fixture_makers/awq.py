#!/usr/bin/env python3
"""Write AWQ GEMM fixtures with AutoAWQ's own code.

Runs, unmodified, from an AutoAWQ source tree given by --tool-src (the directory holding the `awq/`
package): AwqQuantizer._apply_quant (which calls AwqQuantizer.pseudo_quantize_tensor and
WQLinear_GEMM.from_linear, awq/modules/linear/gemm.py), awq/utils/packing_utils.py dequantize_gemm for
the references, and awq/models/_config.py AwqConfig.to_transformers_dict for config.json's
quantization_config. No calibration: the activation-aware scale/clip search (apply_scale / apply_clip),
which only changes the weights fed to _apply_quant, is skipped. Fetched code stays outside the repository:

    git --git-dir=<mirror of casper-hansen/AutoAWQ> archive 88e4c76b20755db275574e6a03c83c84ba3bece5 | tar -x -C /tmp/autoawq
    python3 tests/fixture_makers/awq.py --tool-src /tmp/autoawq

Needs torch and numpy; AutoAWQ quantizes in fp16, so torch >= 2.4 (CPU Half kernels, torch.xpu) or a GPU;
torch 1.13's CPU lacks Half clamp_min. Stubs: see tests/data/fixtures/README-gptq-awq.md.
"""
import argparse
import ast
import importlib.util
import json
import os
import sys
import types
from typing import Dict, Optional

import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gptq import read_checkpoint, st_read, st_write, REPO  # noqa: E402  (the tiny safetensors reader/writer)


def _stub(name, package=False, **attrs):
    m = types.ModuleType(name)
    if package:
        m.__path__ = []
    m.__dict__.update(attrs)
    sys.modules[name] = m
    return m


def _load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    m = importlib.util.module_from_spec(spec)
    sys.modules[name] = m
    spec.loader.exec_module(m)
    return m


def _method_source(path, cls, meth):
    src = open(path).read()
    node = next(n for n in ast.parse(src).body if isinstance(n, ast.ClassDef) and n.name == cls)
    fn = next(n for n in node.body if isinstance(n, ast.FunctionDef) and n.name == meth)
    lines = src.splitlines(keepends=True)[fn.lineno - 1:fn.end_lineno]
    indent = len(lines[0]) - len(lines[0].lstrip(" "))
    return "".join(l[indent:] if l.startswith(" " * indent) else l for l in lines)


def load_autoawq(src):
    root = os.path.join(src, "awq")

    class PushToHubMixin:  # base class of AwqConfig; only its hub upload methods come from transformers
        pass

    tf = _stub("transformers", package=True)
    tf.utils = _stub("transformers.utils", package=True)
    tf.utils.hub = _stub("transformers.utils.hub", PushToHubMixin=PushToHubMixin, cached_file=None)
    _stub("awq", package=True)
    _stub("awq.utils", package=True)
    try:  # the real file needs accelerate and a torch with torch.xpu (>= 2.4)
        _load("awq.utils.utils", os.path.join(root, "utils/utils.py"))
        utils_note = "real awq/utils/utils.py"
    except Exception as e:
        # stand-in: get_best_device() answers "cpu" as the real one does on a machine without MPS/CUDA/XPU;
        # clear_memory() is a no-op in the real file too (its gc/empty_cache lines are commented out)
        _stub("awq.utils.utils", get_best_device=lambda: "cpu", clear_memory=lambda weight=None: None)
        utils_note = f"stubbed awq/utils/utils.py ({type(e).__name__}: {e})"
    module = _load("awq.utils.module", os.path.join(root, "utils/module.py"))
    packing = _load("awq.utils.packing_utils", os.path.join(root, "utils/packing_utils.py"))
    _stub("awq.modules", package=True)
    _stub("awq.modules.linear", package=True)
    # gemm.py: try_import("awq_ext") fails (no compiled kernels); `from awq.modules.triton.gemm import ...`
    # works only where Triton and a GPU are (then used below as a cross-check of dequantize_gemm)
    triton_gemm = None
    if torch.cuda.is_available():
        try:
            import triton  # noqa: F401
            _stub("awq.modules.triton", package=True)
            triton_gemm = _load("awq.modules.triton.gemm", os.path.join(root, "modules/triton/gemm.py"))
        except ImportError:
            pass
    gemm = _load("awq.modules.linear.gemm", os.path.join(root, "modules/linear/gemm.py"))
    _stub("awq.models", package=True)
    config = _load("awq.models._config", os.path.join(root, "models/_config.py"))
    qpath = os.path.join(root, "quantize/quantizer.py")
    ns = {"torch": torch, "nn": nn, "Dict": Dict, "Optional": Optional, "WQLinear_GEMM": gemm.WQLinear_GEMM,
          "get_best_device": sys.modules["awq.utils.utils"].get_best_device,
          "clear_memory": sys.modules["awq.utils.utils"].clear_memory, "set_op_by_name": module.set_op_by_name}
    for meth in ("pseudo_quantize_tensor", "_apply_quant"):
        exec(compile(_method_source(qpath, "AwqQuantizer", meth), qpath, "exec"), ns)
    return types.SimpleNamespace(module=module, packing=packing, gemm=gemm, config=config, triton_gemm=triton_gemm,
                                 utils_note=utils_note, best_device=sys.modules["awq.utils.utils"].get_best_device(),
                                 pseudo_quantize_tensor=ns["pseudo_quantize_tensor"], apply_quant=ns["_apply_quant"])


class _Norm(nn.Module):
    def __init__(self, w):
        super().__init__()
        self.weight = nn.Parameter(w, requires_grad=False)


def decoder_layer(sd, l):
    """A LlamaDecoderLayer-shaped module tree holding the layer's weights in fp16, as AutoAWQ loads the
    model (from_pretrained(torch_dtype=torch.float16))."""
    p = f"model.layers.{l}."
    layer = nn.Module()
    layer.self_attn, layer.mlp = nn.Module(), nn.Module()
    for sub, names in (("self_attn", ("q_proj", "k_proj", "v_proj", "o_proj")), ("mlp", ("gate_proj", "up_proj", "down_proj"))):
        for n in names:
            W = sd[f"{p}{sub}.{n}.weight"]
            lin = nn.Linear(W.shape[1], W.shape[0], bias=False)
            lin.weight = nn.Parameter(W.to(torch.float16), requires_grad=False)
            setattr(getattr(layer, sub), n, lin)
    layer.input_layernorm = _Norm(sd[p + "input_layernorm.weight"].to(torch.float16))
    layer.post_attention_layernorm = _Norm(sd[p + "post_attention_layernorm.weight"].to(torch.float16))
    return layer


VARIANTS = [("llama-awq-4bit-g128", 128), ("llama-awq-4bit-g64", 64)]
REF_SUBSET = {"model.layers.0.self_attn.k_proj.weight", "model.layers.1.self_attn.v_proj.weight"}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tool-src", required=True, help="directory holding AutoAWQ's awq/ package")
    ap.add_argument("--llama", default=os.path.join(REPO, "tests/data/fixtures/llama-bf16"))
    ap.add_argument("--out", default=os.path.join(REPO, "tests/data/fixtures"))
    ap.add_argument("--refs", default=None, help="reference folder (default <out>/refs)")
    ap.add_argument("--all-refs", action="store_true", help="write the reference of every quantized weight")
    args = ap.parse_args()
    refs_dir = args.refs or os.path.join(args.out, "refs")
    A = load_autoawq(args.tool_src)
    print(f"AutoAWQ from {args.tool_src}; torch {torch.__version__}; {A.utils_note}; get_best_device() = {A.best_device}")

    sd = read_checkpoint(args.llama)
    cfg = json.load(open(os.path.join(args.llama, "config.json")))
    n_layers = cfg["num_hidden_layers"]
    for name, gs in VARIANTS:
        # AutoAWQ's documented quant_config, through AwqConfig.from_dict as BaseAWQForCausalLM.quantize does
        qc = A.config.AwqConfig.from_dict({"zero_point": True, "q_group_size": gs, "w_bit": 4, "version": "GEMM"})
        quantizer = types.SimpleNamespace(w_bit=qc.w_bit, group_size=qc.q_group_size, zero_point=qc.zero_point,
                                          version=qc.version)
        quantizer.pseudo_quantize_tensor = types.MethodType(A.pseudo_quantize_tensor, quantizer)
        out, expected_q = {}, {}
        for k, v in sd.items():
            if not k.startswith("model.layers."):
                out[k] = v.to(torch.float16)  # the whole model is fp16 in AutoAWQ
        for l in range(n_layers):
            layer = decoder_layer(sd, l)
            named_linears = A.module.get_named_linears(layer)
            # diagnostics only: the codes pseudo_quantize_tensor chose, to compare with what from_linear packed
            for n, lin in named_linears.items():
                w = lin.weight.data.half().reshape(-1, gs)
                mx, mn = w.amax(dim=1, keepdim=True), w.amin(dim=1, keepdim=True)
                s = (mx - mn).clamp(min=1e-5) / 15
                z = (-torch.round(mn / s)).clamp_(0, 15)
                expected_q[f"model.layers.{l}.{n}"] = torch.clamp(torch.round(w / s) + z, 0, 15).reshape(lin.weight.shape)
            A.apply_quant(quantizer, layer, named_linears)
            for k, v in layer.state_dict().items():
                out[f"model.layers.{l}.{k}"] = v
        folder = os.path.join(args.out, name)
        st_write(os.path.join(folder, "model.safetensors"), out)
        config = dict(cfg)
        config["dtype"] = "float16"
        config["quantization_config"] = qc.to_transformers_dict()
        with open(os.path.join(folder, "config.json"), "w") as f:
            f.write(json.dumps(config, indent=2, sort_keys=True) + "\n")

        back = st_read(os.path.join(folder, "model.safetensors"))
        refs, bad_codes, zmin, n_triton = {}, 0, 16, None
        for k in sorted(back):
            if not k.endswith(".qweight"):
                continue
            p = k[:-len(".qweight")]
            qw, qz, sc = back[p + ".qweight"], back[p + ".qzeros"], back[p + ".scales"]
            w = A.packing.dequantize_gemm(qw, qz, sc, qc.w_bit, qc.q_group_size)  # [K, N]
            iw, iz = A.packing.reverse_awq_order(*A.packing.unpack_awq(qw, qz, qc.w_bit), qc.w_bit)
            bad_codes += int(((iw & 15).T.float() != expected_q[p]).sum())
            zmin = min(zmin, int((iz & 15).min()))
            if A.triton_gemm is not None:  # AutoAWQ's Triton dequant (its GPU inference path for large inputs)
                wt = A.triton_gemm.awq_dequantize_triton(qw.cuda(), sc.cuda(), qz.cuda()).cpu()
                assert wt.dtype == w.dtype and wt.shape == w.shape
                n_triton = (n_triton or 0) + int((wt != w).sum())
            if args.all_refs or p + ".weight" in REF_SUBSET:
                refs[p + ".weight"] = w.T.contiguous()
        st_write(os.path.join(refs_dir, f"{name}.dequant.autoawq.safetensors"), refs)
        print(f"{name}: refs {len(refs)} tensors ({next(iter(refs.values())).dtype}); packed codes differing "
              f"from pseudo_quantize_tensor's: {bad_codes}; smallest zero {zmin}; awq_dequantize_triton elements "
              f"differing: {n_triton if n_triton is not None else 'not run (no GPU/Triton)'}")


if __name__ == "__main__":
    main()
