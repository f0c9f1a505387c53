#!/usr/bin/env python3
"""Write compressed-tensors `pack-quantized` fixtures with the tool's own code.

Every number in the outputs comes from the unmodified source of
vllm-project/compressed-tensors (quantization config classes, apply/initialize,
calculate_qparams, quantize, pack_to_int32, ModelCompressor.compress_model and
update_config, PackedQuantizationCompressor.decompress through
CompressedTensorsDequantizer.process) and of vllm-project/llm-compressor (the
weight observer `memoryless_minmax`, and GPTQ's quantize_weight for the
activation-ordering variant). This script only builds the module tree, feeds
weights in, and reads and writes safetensors files.

What is not the tools' code (see tests/data/fixtures/README-compressed-tensors.md):
* ct_stubs/ : stand-ins for pydantic (v2 API subset), pydantic_core, loguru, tqdm,
  transformers, safetensors and huggingface_hub, none of which are installed here;
* _torch_compat(): names that torch 1.13 lacks and that the tools touch at import
  time or in paths irrelevant to integer packing (float8/uint16.. dtypes as inert
  placeholders, torch.nn.Buffer, bare `@torch.no_grad`);
* compressed_tensors.version: setuptools_scm writes it at build time; it is
  supplied from --tool-version when the source tree has none.

Usage (see the README for the fetch/extract step):
  python3 tests/fixture_makers/compressed_tensors_pack_quantized.py \
      --tool-src /tmp/ct --llmc-src /tmp/llmc --tool-version 0.18.0
"""

import argparse
import importlib.util
import json
import os
import re
import shutil
import struct
import sys
import types

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))

# ----------------------------------------------------------------------------
# safetensors I/O (tiny reader and writer)
# ----------------------------------------------------------------------------

_ST_DTYPES = {
    "BF16": ("bfloat16", 2),
    "F16": ("float16", 2),
    "F32": ("float32", 4),
    "F64": ("float64", 8),
    "I8": ("int8", 1),
    "U8": ("uint8", 1),
    "I16": ("int16", 2),
    "I32": ("int32", 4),
    "I64": ("int64", 8),
    "BOOL": ("bool", 1),
    "F8_E4M3": ("float8_e4m3fn", 1),
}


def read_safetensors(path):
    import torch

    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + n].decode("utf-8"))
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        tname, size = _ST_DTYPES[info["dtype"]]
        begin, end = info["data_offsets"]
        buf = raw[base + begin : base + end]
        shape = info["shape"]
        if tname == "bfloat16":
            arr = np.frombuffer(buf, dtype="<i2").copy()
            t = torch.from_numpy(arr).view(torch.bfloat16)
        elif tname == "float8_e4m3fn":
            t = torch.from_numpy(np.frombuffer(buf, dtype=np.uint8).copy()).view(torch.float8_e4m3fn)
        else:
            arr = np.frombuffer(buf, dtype=np.dtype(tname).newbyteorder("<")).copy()
            t = torch.from_numpy(arr)
        out[name] = t.reshape(shape)
    return out


def read_snapshot(folder):
    index = os.path.join(folder, "model.safetensors.index.json")
    tensors = {}
    if os.path.exists(index):
        with open(index) as f:
            weight_map = json.load(f)["weight_map"]
        for shard in sorted(set(weight_map.values())):
            tensors.update(read_safetensors(os.path.join(folder, shard)))
    else:
        tensors.update(read_safetensors(os.path.join(folder, "model.safetensors")))
    return tensors


def _st_dtype(t):
    import torch

    return {
        torch.bfloat16: "BF16",
        torch.float16: "F16",
        torch.float32: "F32",
        torch.float64: "F64",
        torch.int8: "I8",
        torch.uint8: "U8",
        torch.int16: "I16",
        torch.int32: "I32",
        torch.int64: "I64",
        torch.bool: "BOOL",
        **({torch.float8_e4m3fn: "F8_E4M3"} if hasattr(torch.float8_e4m3fn, "itemsize") else {}),
    }[t.dtype]


def _tensor_bytes(t):
    import torch

    t = t.detach().contiguous().cpu()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().astype("<i2").tobytes()
    if str(t.dtype) == "torch.float8_e4m3fn":
        return t.view(torch.uint8).numpy().tobytes()
    return t.numpy().astype(t.numpy().dtype.newbyteorder("<")).tobytes()


def write_safetensors(path, tensors, metadata=None):
    """8-byte LE header length, JSON header (names sorted, data in that order), bytes.
    The header is padded with spaces to a multiple of 8."""
    header = {}
    if metadata is not None:
        header["__metadata__"] = metadata
    blobs = []
    offset = 0
    for name in sorted(tensors):
        t = tensors[name]
        data = _tensor_bytes(t)
        header[name] = {
            "dtype": _st_dtype(t),
            "shape": list(t.shape),
            "data_offsets": [offset, offset + len(data)],
        }
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


# ----------------------------------------------------------------------------
# importing the tools
# ----------------------------------------------------------------------------


def _torch_compat():
    """Names torch 1.13 lacks. None of them is used by int packing or its arithmetic:
    * float8_*/uint16/32/64/float8_e8m0fnu/float4_e2m1fn_x2: inert placeholder objects (equal to
      no real dtype), used by the tools only for FP8/FP4/MX formats and safetensors dtype tables;
      torch.finfo answers for the float8 placeholders with the formats' real max/min
      (quant_args.FP8_E4M3_DATA reads them in its class body);
    * torch.nn.Buffer (torch >= 2.5): a class no tensor is an instance of; in torch 2.x only
      tensors made with torch.nn.Buffer(...) are, and nothing here makes one;
    * bare `@torch.no_grad` (torch >= 2.0) on llm-compressor's Observer methods.
    On a torch that has these names, nothing is changed."""
    import torch

    class _AbsentDtype:
        def __init__(self, name):
            self.name = name

        def __repr__(self):
            return f"torch.{self.name}"

        is_floating_point = False

    f8 = {
        "float8_e4m3fn": (448.0, -448.0),
        "float8_e5m2": (57344.0, -57344.0),
        "float8_e4m3fnuz": (240.0, -240.0),
        "float8_e5m2fnuz": (57344.0, -57344.0),
    }
    patched = []
    for name in list(f8) + ["uint16", "uint32", "uint64", "float8_e8m0fnu", "float4_e2m1fn_x2"]:
        if not hasattr(torch, name):
            setattr(torch, name, _AbsentDtype(name))
            patched.append(name)
    if patched:
        real_finfo = torch.finfo

        def finfo(dtype=None):
            if isinstance(dtype, _AbsentDtype) and dtype.name in f8:
                mx, mn = f8[dtype.name]
                return types.SimpleNamespace(max=mx, min=mn, bits=8)
            return real_finfo() if dtype is None else real_finfo(dtype)

        torch.finfo = finfo
    if not hasattr(torch.nn, "Buffer"):
        torch.nn.Buffer = type("Buffer", (), {})
        patched.append("nn.Buffer")
    try:
        torch.no_grad(lambda: None)
    except TypeError:
        real_no_grad = torch.no_grad

        class no_grad(real_no_grad):
            def __new__(cls, func=None):
                if func is not None and callable(func):
                    return real_no_grad()(func)
                return super().__new__(cls)

            def __init__(self, func=None):
                super().__init__()

        torch.no_grad = no_grad
        patched.append("no_grad(bare)")
    return patched


def _load_file_as(modname, path):
    spec = importlib.util.spec_from_file_location(modname, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[modname] = mod
    spec.loader.exec_module(mod)
    return mod


def _bare_package(modname, path):
    """A package object whose __init__.py is NOT run (llm-compressor's pull in transformers,
    datasets, ...); its submodules are loaded one by one with _load_file_as."""
    mod = types.ModuleType(modname)
    mod.__path__ = [path]
    sys.modules[modname] = mod
    return mod


def import_tools(tool_src, llmc_src, tool_version):
    ct_src = os.path.join(tool_src, "src") if os.path.isdir(os.path.join(tool_src, "src")) else tool_src
    llmc_pkg = os.path.join(llmc_src, "src", "llmcompressor")
    sys.path.insert(0, os.path.join(HERE, "ct_stubs"))
    sys.path.insert(0, ct_src)
    patched = _torch_compat()
    if not os.path.exists(os.path.join(ct_src, "compressed_tensors", "version.py")):
        if not tool_version:
            raise SystemExit("the tool source has no version.py: pass --tool-version")
        vm = types.ModuleType("compressed_tensors.version")
        vm.__version__ = vm.version = tool_version
        vm.__all__ = ["__version__", "version"]
        sys.modules["compressed_tensors.version"] = vm
    import compressed_tensors  # noqa: F401

    # llm-compressor: only the observer files and gptq_quantize.py
    _bare_package("llmcompressor", llmc_pkg)
    obs_pkg = _bare_package("llmcompressor.observers", os.path.join(llmc_pkg, "observers"))
    for sub in ("fusion", "helpers", "base", "min_max"):
        m = _load_file_as(f"llmcompressor.observers.{sub}", os.path.join(llmc_pkg, "observers", sub + ".py"))
        for k in getattr(m, "__all__", []):
            setattr(obs_pkg, k, getattr(m, k))
    _bare_package("llmcompressor.modifiers", os.path.join(llmc_pkg, "modifiers"))
    _bare_package("llmcompressor.modifiers.quantization", os.path.join(llmc_pkg, "modifiers", "quantization"))
    calib = _load_file_as(
        "llmcompressor.modifiers.quantization.calibration",
        os.path.join(llmc_pkg, "modifiers", "quantization", "calibration.py"),
    )
    _bare_package("llmcompressor.modifiers.gptq", os.path.join(llmc_pkg, "modifiers", "gptq"))
    gptq = _load_file_as(
        "llmcompressor.modifiers.gptq.gptq_quantize",
        os.path.join(llmc_pkg, "modifiers", "gptq", "gptq_quantize.py"),
    )
    return patched, calib, gptq


# ----------------------------------------------------------------------------
# model skeleton
# ----------------------------------------------------------------------------


def build_module_tree(state_dict, class_names):
    """nn.Module tree whose named_modules() are the checkpoint's module names.
    2-D `.weight` tensors of projections become nn.Linear, embed_tokens nn.Embedding,
    1-D norm weights a parameter holder; containers are plain modules named as HF's classes."""
    import torch

    def make_class(name):
        return type(name, (torch.nn.Module,), {})

    classes = {}

    def cls_for(path):
        for pattern, cname in class_names:
            if re.fullmatch(pattern, path):
                if cname not in classes:
                    classes[cname] = make_class(cname)
                return classes[cname]
        if "Container" not in classes:
            classes["Container"] = make_class("Container")
        return classes["Container"]

    root = cls_for("")()
    for name in sorted(state_dict):
        t = state_dict[name]
        mod_path, _, pname = name.rpartition(".")
        parts = mod_path.split(".")
        node = root
        for i, p in enumerate(parts[:-1]):
            if not hasattr(node, p):
                node.add_module(p, cls_for(".".join(parts[: i + 1]))())
            node = getattr(node, p)
        leaf = parts[-1]
        if pname != "weight":
            raise ValueError(name)
        if leaf == "embed_tokens":
            m = torch.nn.Embedding(t.shape[0], t.shape[1], device="meta")
        elif t.ndim == 2:
            m = torch.nn.Linear(t.shape[1], t.shape[0], bias=False, device="meta")
        else:
            m = cls_for(mod_path)()
        m.weight = torch.nn.Parameter(t.clone(), requires_grad=False)
        node.add_module(leaf, m)
    return root


# (regex on the module path, class name) -- only the class names of Linear/Embedding matter
# to the tools (targets "Linear"); the others are named as transformers names them.
LLAMA_CLASSES = [
    (r"", "LlamaForCausalLM"),
    (r"model", "LlamaModel"),
    (r"model\.layers", "ModuleList"),
    (r"model\.layers\.\d+", "LlamaDecoderLayer"),
    (r".*\.self_attn", "LlamaAttention"),
    (r".*\.mlp", "LlamaMLP"),
    (r".*layernorm|model\.norm", "LlamaRMSNorm"),
]
MIXTRAL_CLASSES = [
    (r"", "MixtralForCausalLM"),
    (r"model", "MixtralModel"),
    (r"model\.layers", "ModuleList"),
    (r"model\.layers\.\d+", "MixtralDecoderLayer"),
    (r".*\.self_attn", "MixtralAttention"),
    (r".*\.block_sparse_moe", "MixtralSparseMoeBlock"),
    (r".*\.experts", "ModuleList"),
    (r".*\.experts\.\d+", "MixtralBlockSparseTop2MLP"),
    (r".*layernorm|model\.norm", "MixtralRMSNorm"),
]


# ----------------------------------------------------------------------------
# tiny Mixtral
# ----------------------------------------------------------------------------

MOE_CONFIG = {
    "architectures": ["MixtralForCausalLM"],
    "attention_dropout": 0.0,
    "bos_token_id": 1,
    "dtype": "bfloat16",
    "eos_token_id": 2,
    "head_dim": 64,
    "hidden_act": "silu",
    "hidden_size": 256,
    "initializer_range": 0.02,
    "intermediate_size": 512,
    "max_position_embeddings": 256,
    "model_type": "mixtral",
    "num_attention_heads": 4,
    "num_experts_per_tok": 2,
    "num_hidden_layers": 2,
    "num_key_value_heads": 2,
    "num_local_experts": 4,
    "output_router_logits": False,
    "rms_norm_eps": 1e-05,
    "rope_parameters": {"rope_theta": 1000000.0, "rope_type": "default"},
    "router_aux_loss_coef": 0.02,
    "router_jitter_noise": 0.0,
    "sliding_window": None,
    "tie_word_embeddings": False,
    "use_cache": True,
    "vocab_size": 512,
}


def make_moe_state_dict(seed):
    """N(0, 0.02) BF16 weights, about 0.2% of entries x20 (outliers), norms = 1."""
    import torch

    c = MOE_CONFIG
    g = torch.Generator().manual_seed(seed)
    h, inter, hd = c["hidden_size"], c["intermediate_size"], c["head_dim"]
    nq, nkv, ne, v = c["num_attention_heads"], c["num_key_value_heads"], c["num_local_experts"], c["vocab_size"]

    def w(n, k):
        x = torch.randn(n, k, generator=g, dtype=torch.float32) * 0.02
        mask = torch.rand(n, k, generator=g) < 0.002
        x = torch.where(mask, x * 20.0, x)
        return x.to(torch.bfloat16)

    sd = {"model.embed_tokens.weight": w(v, h)}
    for L in range(c["num_hidden_layers"]):
        p = f"model.layers.{L}."
        sd[p + "self_attn.q_proj.weight"] = w(nq * hd, h)
        sd[p + "self_attn.k_proj.weight"] = w(nkv * hd, h)
        sd[p + "self_attn.v_proj.weight"] = w(nkv * hd, h)
        sd[p + "self_attn.o_proj.weight"] = w(h, nq * hd)
        sd[p + "block_sparse_moe.gate.weight"] = w(ne, h)
        for e in range(ne):
            q = p + f"block_sparse_moe.experts.{e}."
            sd[q + "w1.weight"] = w(inter, h)
            sd[q + "w2.weight"] = w(h, inter)
            sd[q + "w3.weight"] = w(inter, h)
        sd[p + "input_layernorm.weight"] = torch.ones(h, dtype=torch.bfloat16)
        sd[p + "post_attention_layernorm.weight"] = torch.ones(h, dtype=torch.bfloat16)
    sd["model.norm.weight"] = torch.ones(h, dtype=torch.bfloat16)
    sd["lm_head.weight"] = w(v, h)
    return sd


# ----------------------------------------------------------------------------
# variants
# ----------------------------------------------------------------------------


def variant_specs():
    from compressed_tensors.quantization import QuantizationArgs, QuantizationScheme, preset_name_to_scheme

    def scheme(**weights):
        return QuantizationScheme(targets=["Linear"], weights=QuantizationArgs(**weights))

    return {
        # RedHatAI W4A16 = the tool's preset W4A16 (int4, symmetric, group 128)
        "llama-ct-w4a16-g128": dict(
            model="llama", scheme=lambda: preset_name_to_scheme("W4A16", ["Linear"]), gptq=False
        ),
        "llama-ct-w4-asym-g64": dict(
            model="llama",
            scheme=lambda: scheme(num_bits=4, type="int", symmetric=False, strategy="group", group_size=64),
            gptq=False,
        ),
        "llama-ct-w8a16-channel": dict(
            model="llama",
            scheme=lambda: scheme(num_bits=8, type="int", symmetric=True, strategy="channel"),
            gptq=False,
        ),
        "llama-ct-w8-asym-g128": dict(
            model="llama",
            scheme=lambda: scheme(num_bits=8, type="int", symmetric=False, strategy="group", group_size=128),
            gptq=False,
        ),
        "llama-ct-w4-g128-actorder": dict(
            model="llama",
            scheme=lambda: scheme(
                num_bits=4, type="int", symmetric=True, strategy="group", group_size=128, actorder="group"
            ),
            gptq=True,
        ),
        "moe-ct-w4a16-g128": dict(
            model="moe", scheme=lambda: preset_name_to_scheme("W4A16", ["Linear"]), gptq=False
        ),
        # NVFP4 weights (nvfp4-pack-quantized): E2M1 codes, E4M3 scales per 16, a global scale
        # shared by fused q/k/v and gate/up as llm-compressor links their observers
        # (fuse_weight_observers). Needs torch with float8_e4m3fn (>= 2.1): run on the GPU machine.
        "llama-ct-nvfp4a16": dict(
            model="llama", scheme=lambda: preset_name_to_scheme("NVFP4A16", ["Linear"]), gptq=False, fuse=True
        ),
        "moe-ct-nvfp4a16": dict(
            model="moe", scheme=lambda: preset_name_to_scheme("NVFP4A16", ["Linear"]), gptq=False, fuse=True
        ),
        # MXFP4 weights (mxfp4-pack-quantized): E2M1 codes packed two a byte, an E8M0 exponent
        # (U8) per 32 elements, no global scale. (MXFP8A16 is not made: the tool's own
        # model-free dequantizer refuses its checkpoint, asking a weight_scale of embed_tokens.)
        # FP8 weights (float-quantized, W8A16): E4M3 codes and their scales per tensor, per
        # channel or per 128x128 block; and MXFP8 (mxfp8-quantized): E4M3 codes with an E8M0
        # exponent per 32. Weights only (no activation calibration here).
        "llama-ct-fp8-tensor": dict(model="llama", scheme=lambda: scheme(num_bits=8, type="float", symmetric=True, strategy="tensor"), gptq=False),
        "llama-ct-fp8-channel": dict(model="llama", scheme=lambda: scheme(num_bits=8, type="float", symmetric=True, strategy="channel"), gptq=False),
        "llama-ct-fp8-block": dict(
            model="llama",
            scheme=lambda: scheme(num_bits=8, type="float", symmetric=True, strategy="block", block_structure=[128, 128]),
            gptq=False,
        ),
        "llama-ct-mxfp8a16": dict(model="llama", scheme=lambda: preset_name_to_scheme("MXFP8A16", ["Linear"]), gptq=False),
        "llama-ct-mxfp4a16": dict(
            model="llama", scheme=lambda: preset_name_to_scheme("MXFP4A16", ["Linear"]), gptq=False
        ),
        "moe-ct-mxfp4a16": dict(
            model="moe", scheme=lambda: preset_name_to_scheme("MXFP4A16", ["Linear"]), gptq=False
        ),
    }


# Reference subset (to keep the bytes down; --refs all writes every quantized weight):
# N=128 (4-bit zero points pack into 16 rows) and K=512 (4 or 8 groups, g_idx over 512 columns).
REF_SUBSET = {
    "llama": [
        "model.layers.0.self_attn.k_proj.weight",  # N=128, K=256
        "model.layers.1.mlp.down_proj.weight",  # N=256, K=512
    ],
    "moe": [
        "model.layers.0.self_attn.k_proj.weight",  # N=128, K=256
        "model.layers.1.block_sparse_moe.experts.3.w2.weight",  # N=256, K=512 (an expert)
        "model.layers.0.block_sparse_moe.experts.1.w1.weight",  # an expert of layer 0, the one trim_fixture keeps
    ],
}


def make_variant(name, spec, args, calib, gptq_mod, out_fixtures, out_refs, llama_sd, moe_sd):
    import torch
    from compressed_tensors.compressors import ModelCompressor
    from compressed_tensors.compressors.base import BaseCompressor
    from compressed_tensors.entrypoints.convert.converters.ct_dequantizer import CompressedTensorsDequantizer
    from compressed_tensors.offload import update_offload_parameter
    from compressed_tensors.quantization import QuantizationConfig, apply_quantization_config
    from compressed_tensors.quantization.utils import is_module_quantized

    if spec["model"] == "llama":
        sd, class_names = llama_sd, LLAMA_CLASSES
        ignore = ["lm_head"]
    else:
        sd, class_names = moe_sd, MIXTRAL_CLASSES
        ignore = ["lm_head", "re:.*block_sparse_moe.gate$"]
    model = build_module_tree(sd, class_names)

    # 1. the config, as llm-compressor's QuantizationModifier/GPTQModifier resolve it
    qconfig = QuantizationConfig(config_groups={"group_0": spec["scheme"]()}, ignore=ignore)
    # 2. compressed-tensors: attach schemes, initialize weight_scale / weight_zero_point / g_idx
    apply_quantization_config(model, qconfig)
    quantized = [(n, m) for n, m in model.named_modules() if is_module_quantized(m)]

    # 3. llm-compressor: calibrate the weights (memoryless_minmax observer), or GPTQ. NVFP4:
    #    every observer first, then the fused groups linked (llm-compressor's order), then
    #    observation, so that q/k/v and gate/up take one global scale.
    ko = None
    for mname, module in quantized:
        calib.initialize_observer(module, "weight")
    if spec.get("fuse"):
        from llmcompressor.observers.helpers import fuse_weight_observers

        fuse_weight_observers(model)
    for mname, module in quantized:
        calib.observe(module, "weight")
        if not spec["gptq"]:
            calib.update_qparams(module, "weight")
        else:
            # GPTQ with actorder="group". No calibration data: a diagonal Hessian with seeded
            # random distinct entries. GPTQ orders columns by argsort(diag(H), descending); with a
            # diagonal H its error feedback is zero, so this is round-to-nearest in that order.
            k = module.weight.shape[1]
            gen = torch.Generator().manual_seed(args.seed * 1000 + _stable_id(mname))
            diag = torch.rand(k, generator=gen, dtype=torch.float32) + 0.5
            H = torch.diag(diag)
            quant_args = module.quantization_scheme.weights
            _loss, q_param_dict = gptq_mod.quantize_weight(
                module=module, quant_args=quant_args, hessian=H, blocksize=128, percdamp=0.01
            )
            for attr, val in q_param_dict.items():
                update_offload_parameter(module, attr, val)
        # llm-compressor removes observers before saving (freeze_module_quantization)
        if hasattr(module, "weight_observer"):
            delattr(module, "weight_observer")

    # 4. compressed-tensors: compress (pack) and serialize the config, as llm-compressor's
    #    save_pretrained wrapper does: from_pretrained_model -> compress_model -> save -> update_config
    compressor = ModelCompressor.from_pretrained_model(model, quantization_format=None)
    compressor.compress_model(model)
    if hasattr(model, "ct_decompress_hook"):
        model.ct_decompress_hook.remove()

    out_dir = os.path.join(out_fixtures, name)
    if os.path.isdir(out_dir):
        shutil.rmtree(out_dir)
    os.makedirs(out_dir)
    tensors = {k: v for k, v in model.state_dict().items()}
    # Two shards + index, as save_pretrained writes them: shard 1 holds the quantized modules'
    # tensors, shard 2 everything copied through (embeddings, norms, lm_head, MoE routers), so
    # shard 2 is byte-identical across the Llama variants (git stores it once).
    qnames = {n for n, _ in quantized}
    shard1 = {k: v for k, v in tensors.items() if k.rpartition(".")[0] in qnames}
    shard2 = {k: v for k, v in tensors.items() if k not in shard1}
    for k, v in shard2.items():  # copied through unchanged
        assert v.dtype == sd[k].dtype and torch.equal(v.view(torch.int16), sd[k].view(torch.int16)), k
    assert set(shard2) | {n + ".weight" for n in qnames} == set(sd)
    files = {"model-00001-of-00002.safetensors": shard1, "model-00002-of-00002.safetensors": shard2}
    weight_map, total = {}, 0
    for fname, part in files.items():
        write_safetensors(os.path.join(out_dir, fname), part, metadata={"format": "pt"})
        for k, v in part.items():
            weight_map[k] = fname
            total += v.numel() * v.element_size()
    with open(os.path.join(out_dir, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}, f, indent=2)
        f.write("\n")
    if spec["model"] == "llama":
        shutil.copyfile(os.path.join(args.source_llama, "config.json"), os.path.join(out_dir, "config.json"))
        shutil.copyfile(
            os.path.join(args.source_llama, "generation_config.json"),
            os.path.join(out_dir, "generation_config.json"),
        )
    else:
        with open(os.path.join(out_dir, "config.json"), "w") as f:
            json.dump(MOE_CONFIG, f, indent=2, sort_keys=True)
        shutil.copyfile(
            os.path.join(args.source_llama, "generation_config.json"),
            os.path.join(out_dir, "generation_config.json"),
        )
    compressor.update_config(out_dir)

    # 5. references: read the written checkpoint back and dequantize it with the tool's
    #    model-free path (CompressedTensorsDequantizer.process -> PackedQuantizationCompressor
    #    .decompress -> unpack_from_int32 + dequantize), config parsed back from config.json.
    with open(os.path.join(out_dir, "config.json")) as f:
        qcfg_dict = json.load(f)["quantization_config"]
    back = read_snapshot(out_dir)
    deq = object.__new__(CompressedTensorsDequantizer)
    deq.dtype = torch.bfloat16  # the converter's default; decompress itself returns scale.dtype
    deq.quant_config = QuantizationConfig.model_validate(qcfg_dict)
    from compressed_tensors.compressors.format import infer_module_format
    from compressed_tensors.config import CompressionFormat

    for sch in deq.quant_config.config_groups.values():
        sch.format = CompressionFormat(infer_module_format(torch.nn.Linear, sch))
    # The model-free path refuses checkpoints whose codes keep the name `weight` (float-quantized,
    # mxfp8-quantized: it asks a weight_scale of every `weight`, embed_tokens' too); there the
    # references are the compressor's own decompress alone, as the record says.
    try:
        deq.validate(dict(back))
        model_free = True
    except ValueError as e:
        print(f"{name}: the tool's model-free dequantizer refuses the checkpoint ({e}); references from decompress", file=sys.stderr)
        model_free = False
    # raw decompress output (dtype as the tool returns it) for the record
    scheme_obj = deq.quant_config.config_groups["group_0"]
    comp = BaseCompressor.get_value_from_registry(scheme_obj.format)
    param_names = comp.compression_param_names(scheme_obj)
    raw = {}
    for mname, _ in quantized:
        local = {p: back[f"{mname}.{p}"] for p in param_names}
        raw[f"{mname}.weight"] = comp.decompress(local, scheme_obj)["weight"]
    for k, v in raw.items():
        assert v.dtype in (torch.bfloat16, torch.float32), (k, v.dtype)
    if model_free:
        dequantized = deq.process(dict(back))
        for k, v in raw.items():
            assert v.dtype == torch.bfloat16, (k, v.dtype)
            assert torch.equal(v.view(torch.int16), dequantized[k].view(torch.int16)), k

    subset = raw.keys() if args.refs == "all" else REF_SUBSET[spec["model"]]
    refs = {k: raw[k] for k in subset}
    ref_path = os.path.join(out_refs, f"{name}.dequant.compressed-tensors.safetensors")
    write_safetensors(ref_path, refs, metadata={"format": "pt"})

    facts = independent_check(back, raw, scheme_obj, param_names) if scheme_obj.weights.type == "int" else {}
    return out_dir, ref_path, facts, qcfg_dict


def _stable_id(s):
    import zlib

    return zlib.crc32(s.encode()) % 1000


# ----------------------------------------------------------------------------
# an independent numpy decode of the written bytes, to state the layout facts
# ----------------------------------------------------------------------------


def _unpack_np(words, bits, n_elems, axis_len_rows):
    """words int32 [R, W] -> uint codes [R, n_elems], element j at global bit bits*j
    of the row's little-endian word stream (dense, may straddle words)."""
    w = words.astype(np.int64) & 0xFFFFFFFF
    R = w.shape[0]
    out = np.zeros((R, n_elems), dtype=np.int64)
    for j in range(n_elems):
        bit = bits * j
        wi, bo = divmod(bit, 32)
        v = w[:, wi] >> bo
        if bo + bits > 32:
            v = v | (w[:, wi + 1] << (32 - bo))
        out[:, j] = v & ((1 << bits) - 1)
    return out


def independent_check(back, raw, scheme, param_names):
    import torch

    bits = scheme.weights.num_bits
    sym = scheme.weights.symmetric
    facts = {}
    for wname, ref in raw.items():
        m = wname[: -len(".weight")]
        packed = back[m + ".weight_packed"]
        scale = back[m + ".weight_scale"]
        shape = back[m + ".weight_shape"]
        N, K = [int(x) for x in shape.tolist()]
        facts.setdefault("dtypes", {})
        for p in param_names:
            facts["dtypes"][p] = str(back[m + "." + p].dtype)
        assert packed.dtype == torch.int32 and tuple(packed.shape) == (N, -(-K * bits // 32))
        codes = _unpack_np(packed.numpy(), bits, K, N)  # unsigned
        q = codes - (1 << (bits - 1))  # signed value the tool quantized to
        G = scale.shape[1]
        gs = K // G
        if "weight_g_idx" in param_names:
            gidx = back[m + ".weight_g_idx"].numpy().astype(np.int64)
        else:
            gidx = np.arange(K) // gs
        if not sym:
            zpw = back[m + ".weight_zero_point"]
            assert zpw.dtype == torch.int32 and tuple(zpw.shape) == (-(-N * bits // 32), G)
            zp = _unpack_np(zpw.numpy().T.copy(), bits, N, G).T - (1 << (bits - 1))  # [N, G]
        else:
            zp = np.zeros((N, G), dtype=np.int64)
        # dequant exactly as the tool: bf16(q) - bf16(zp), then * bf16 scale, each op rounded to bf16
        qt = torch.from_numpy(q).to(torch.bfloat16)
        zt = torch.from_numpy(zp[:, gidx]).to(torch.bfloat16)
        st = scale[:, torch.from_numpy(gidx)]
        mine = (qt - zt) * st
        assert torch.equal(mine.view(torch.int16), ref.view(torch.int16)), wname
        # the same in float32 then rounded once: (q - zp) is exact, so one product, one rounding
        mine32 = ((torch.from_numpy(q - zp[:, gidx]).float()) * st.float()).to(torch.bfloat16)
        facts["single_rounding_equal"] = facts.get("single_rounding_equal", True) and bool(
            torch.equal(mine32.view(torch.int16), ref.view(torch.int16))
        )
        facts["code_range"] = (
            min(facts.get("code_range", (99, -99))[0], int(q.min())),
            max(facts.get("code_range", (99, -99))[1], int(q.max())),
        )
        if not sym:
            facts["zp_range"] = (
                min(facts.get("zp_range", (99, -99))[0], int(zp.min())),
                max(facts.get("zp_range", (99, -99))[1], int(zp.max())),
            )
        if "weight_g_idx" in param_names:
            facts["g_idx_sorted"] = facts.get("g_idx_sorted", True) and bool(np.all(np.diff(gidx) >= 0))
            counts = np.bincount(gidx)
            facts["g_idx_group_sizes"] = sorted(set(counts.tolist()))
        facts["weight_shape"] = f"{shape.dtype} {list(shape.shape)}"
        facts["scale_shape_example"] = f"{wname}: scale {list(scale.shape)} for [{N}, {K}]"
    return facts


# ----------------------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tool-src", required=True, help="compressed-tensors source tree (repo root or src/)")
    ap.add_argument("--llmc-src", required=True, help="llm-compressor source tree (repo root)")
    ap.add_argument("--tool-version", default=None, help="compressed_tensors.__version__ when src has no version.py")
    ap.add_argument("--source-llama", default=os.path.join(REPO, "tests", "data", "fixtures", "llama-bf16"))
    ap.add_argument("--fixtures-out", default=os.path.join(REPO, "tests", "data", "fixtures"))
    ap.add_argument("--refs-out", default=os.path.join(REPO, "tests", "data", "fixtures", "refs"))
    ap.add_argument("--variants", default="all", help="comma-separated variant names, or all")
    ap.add_argument("--refs", choices=["subset", "all"], default="subset")
    ap.add_argument("--seed", type=int, default=1234)
    args = ap.parse_args()

    patched, calib, gptq_mod = import_tools(args.tool_src, args.llmc_src, args.tool_version)
    import torch

    torch.manual_seed(args.seed)
    print(f"torch {torch.__version__}; torch names supplied: {patched or 'none'}", file=sys.stderr)
    llama_sd = read_snapshot(args.source_llama)
    moe_sd = make_moe_state_dict(args.seed)
    specs = variant_specs()
    names = list(specs) if args.variants == "all" else args.variants.split(",")
    os.makedirs(args.refs_out, exist_ok=True)
    report = {}
    for name in names:
        out_dir, ref_path, facts, qcfg = make_variant(
            name, specs[name], args, calib, gptq_mod, args.fixtures_out, args.refs_out, llama_sd, moe_sd
        )
        report[name] = {"facts": facts, "quantization_config": qcfg}
        print(f"== {name}: {out_dir}, {ref_path}", file=sys.stderr)
        print(json.dumps(facts, indent=1, default=str), file=sys.stderr)
    print(json.dumps(report, indent=1, default=str))


if __name__ == "__main__":
    main()
