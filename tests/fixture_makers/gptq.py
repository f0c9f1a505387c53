#!/usr/bin/env python3
"""Write GPTQ fixtures (v1 `gptq` and v2 `gptq_v2` checkpoint formats) with GPTQModel's own code.

The packing (PackableQuantLinear.pack_block, cross-checked against pack_original), the v2 -> v1 export
conversion (utils/model.py convert_gptq_v2_to_v1_format_module), the v1 -> v2 load conversion
(convert_gptq_v1_to_v2_format_module), the dequantization (TorchLinear.dequantize_weight), the
round-to-nearest min/max parameters (quantization/quantizer.py Quantizer.find_params / quantize) and the
quantization_config (quantization/config.py QuantizeConfig.to_dict) all run from an unmodified GPTQModel
source tree given by --tool-src (the directory that holds the `gptqmodel/` package). Fetched code stays
outside this repository, e.g.:

    git --git-dir=<mirror of ModelCloud/GPTQModel> archive f4c327a17eb3e24524d5a97a3d682e3696ae6a28 | tar -x -C /tmp/gptqmodel
    /usr/bin/python3 tests/fixture_makers/gptq.py --tool-src /tmp/gptqmodel

Needs only torch (1.13 is enough) and numpy. The stubs below replace modules that the loaded files import
but whose code is never reached by the arithmetic used here; see tests/data/fixtures/README-gptq-awq.md.
"""
import argparse
import ast
import contextlib
import enum
import hashlib
import importlib.util
import json
import os
import struct
import sys
import types

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

# ----------------------------------------------------------------------------------------------
# tiny safetensors reader / writer
# ----------------------------------------------------------------------------------------------
_ST_DTYPES = {
    "BF16": (torch.bfloat16, np.int16), "F16": (torch.float16, np.float16), "F32": (torch.float32, np.float32),
    "I32": (torch.int32, np.int32), "I64": (torch.int64, np.int64), "I16": (torch.int16, np.int16),
    "I8": (torch.int8, np.int8), "U8": (torch.uint8, np.uint8),
}
_ST_NAMES = {v[0]: k for k, v in _ST_DTYPES.items()}


def st_read(path):
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        tdt, ndt = _ST_DTYPES[info["dtype"]]
        a, b = info["data_offsets"]
        arr = np.frombuffer(data[8 + n + a:8 + n + b], dtype=ndt).copy()
        t = torch.from_numpy(arr)
        if tdt == torch.bfloat16:
            t = t.view(torch.bfloat16)
        out[name] = t.reshape(info["shape"])
    return out


def _tensor_bytes(t):
    t = t.detach().contiguous().cpu()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().tobytes()
    return t.numpy().tobytes()


def st_write(path, tensors):
    header, blobs, off = {}, [], 0
    for name in sorted(tensors):
        t = tensors[name]
        b = _tensor_bytes(t)
        header[name] = {"dtype": _ST_NAMES[t.dtype], "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    header["__metadata__"] = {"format": "pt"}
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def read_checkpoint(folder):
    index = os.path.join(folder, "model.safetensors.index.json")
    files = sorted(set(json.load(open(index))["weight_map"].values())) if os.path.exists(index) else ["model.safetensors"]
    out = {}
    for fn in files:
        out.update(st_read(os.path.join(folder, fn)))
    return out


# ----------------------------------------------------------------------------------------------
# loading GPTQModel's own files with stubs for unrelated imports
# ----------------------------------------------------------------------------------------------
class _Log:
    """Stub for gptqmodel.utils.logger.setup_logger(): a logger that drops messages (also `log.info.once`)."""

    class _Fn:
        def __call__(self, *a, **k):
            pass

        def once(self, *a, **k):
            pass

    def __init__(self):
        for n in ("info", "debug", "warn", "warning", "error", "critical"):
            setattr(self, n, _Log._Fn())


def _stub(name, package=False, **attrs):
    m = types.ModuleType(name)
    if package:
        m.__path__ = []  # nothing below it is importable from disk
    m.__dict__.update(attrs)
    sys.modules[name] = m
    return m


def _load(name, path, package=False):
    spec = importlib.util.spec_from_file_location(name, path, submodule_search_locations=[] if package else None)
    m = importlib.util.module_from_spec(spec)
    sys.modules[name] = m
    spec.loader.exec_module(m)
    return m


def _function_source(path, qualname):
    """Return the verbatim source of a top-level function or a class method from a file."""
    src = open(path).read()
    tree = ast.parse(src)
    parts = qualname.split(".")
    body = tree.body
    node = None
    for p in parts:
        node = next(n for n in body if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name == p)
        body = node.body
    lines = src.splitlines(keepends=True)
    start = node.lineno - 1 if not node.decorator_list else node.decorator_list[0].lineno - 1
    seg = "".join(lines[start:node.end_lineno])
    # dedent a method body to top level
    indent = len(seg) - len(seg.lstrip(" "))
    return "".join(l[indent:] if l.startswith(" " * indent) else l for l in seg.splitlines(keepends=True))


def load_gptqmodel(src):
    root = os.path.join(src, "gptqmodel")
    os.environ["GPTQMODEL_DISABLE_PACK_EXT"] = "1"  # the tool's own switch: use pack_block's Python path

    # --- stubs (see README-gptq-awq.md) ---
    class Conv1D(torch.nn.Module):  # only used in isinstance() checks that are False for nn.Linear
        pass

    class PreTrainedModel(torch.nn.Module):  # only a type annotation in qlinear/torch.py
        pass

    tf = _stub("transformers", package=True, PreTrainedModel=PreTrainedModel, Conv1D=Conv1D)
    tf.pytorch_utils = _stub("transformers.pytorch_utils", Conv1D=Conv1D)
    _stub("pcre", compile=__import__("re").compile)  # regex binding; config.py compiles two patterns
    _stub("gptqmodel", package=True)
    _stub("gptqmodel.adapter", package=True)

    class Adapter:
        pass

    class Lora(Adapter):
        pass

    _stub("gptqmodel.adapter.adapter", Adapter=Adapter, Lora=Lora, LORA_MERGED_WEIGHT_PATHS=[None, ""],
          normalize_adapter=lambda a: a)
    _stub("gptqmodel.utils", package=True)
    _stub("gptqmodel.utils.logger", setup_logger=lambda *a, **k: _Log())
    _stub("gptqmodel.utils.torch", HAS_CUDA=False, HAS_NPU=False, HAS_MPS=False, HAS_XPU=False,
          torch_compile=lambda fn, **k: fn)

    class _TPC:
        @staticmethod
        @contextlib.contextmanager
        def threadpool_limits(*a, **k):
            yield

    _stub("gptqmodel.utils.safe", THREADPOOLCTL=_TPC)
    _stub("gptqmodel.models", package=True)

    class DEVICE(str, enum.Enum):
        ALL = "all"
        CPU = "cpu"
        CUDA = "cuda"

    class PLATFORM(str, enum.Enum):
        ALL = "all"

    _stub("gptqmodel.models._const", DEVICE=DEVICE, PLATFORM=PLATFORM, HAS_CUDA=False)
    # --- real files ---
    _load("gptqmodel.utils.env", os.path.join(root, "utils/env.py"))
    backend = _load("gptqmodel.utils.backend", os.path.join(root, "utils/backend.py"))
    _load("gptqmodel.utils.planar_packing", os.path.join(root, "utils/planar_packing.py"))
    qpkg = _stub("gptqmodel.quantization", package=True)
    cfg = _load("gptqmodel.quantization.config", os.path.join(root, "quantization/config.py"))
    qpkg.FORMAT, qpkg.METHOD, qpkg.QuantizeConfig = cfg.FORMAT, cfg.METHOD, cfg.QuantizeConfig
    quantizer = _load("gptqmodel.quantization.quantizer", os.path.join(root, "quantization/quantizer.py"))
    _stub("gptqmodel.nn_modules", package=True)
    if torch.cuda.is_available():  # GPTQModel's Triton dequant kernel, used only as a cross-check on a GPU
        try:
            import triton  # noqa: F401
            _stub("gptqmodel.nn_modules.triton_utils", package=True)
            _load("gptqmodel.nn_modules.triton_utils.dequant", os.path.join(root, "nn_modules/triton_utils/dequant.py"))
        except ImportError:
            pass
    qlinear = _load("gptqmodel.nn_modules.qlinear", os.path.join(root, "nn_modules/qlinear/__init__.py"), package=True)
    qtorch = _load("gptqmodel.nn_modules.qlinear.torch", os.path.join(root, "nn_modules/qlinear/torch.py"))

    # v1 <-> v2 conversions: verbatim function sources from utils/model.py (that module's own imports,
    # accelerate/safetensors/transformers and dozens of kernels, are not needed by these two functions);
    # their INT3 helpers come from utils/model_dequant.py, whose 3-bit (un)pack helpers are verbatim too.
    md_path = os.path.join(root, "utils/model_dequant.py")
    md_ns = {"torch": torch, "PLANAR_BITS": sys.modules["gptqmodel.utils.planar_packing"].PLANAR_BITS}
    pp = sys.modules["gptqmodel.utils.planar_packing"]
    md_ns.update(planar_pack_cols=pp.planar_pack_cols, planar_unpack_cols=pp.planar_unpack_cols,
                 planar_unpack_rows=pp.planar_unpack_rows)
    for fn in ("unpack_cols", "pack_cols", "unpack_rows", "_require_int32_words_for_3bit", "_unpack_cols_3bit",
               "_pack_cols_3bit", "_unpack_rows_3bit", "_uses_gptq_v1_qzeros", "_shift_gptq_qzeros",
               "_correct_gptq_v1_qzeros", "_revert_gptq_v1_qzeros_correction"):
        exec(compile("from __future__ import annotations\n" + _function_source(md_path, fn), md_path, "exec"), md_ns)
    conv_ns = {"torch": torch, "nn": torch.nn, "BaseQuantLinear": qlinear.BaseQuantLinear,
               "QuantizeConfig": cfg.QuantizeConfig, "log": _Log(),
               "_correct_gptq_v1_qzeros": md_ns["_correct_gptq_v1_qzeros"],
               "_revert_gptq_v1_qzeros_correction": md_ns["_revert_gptq_v1_qzeros_correction"]}
    mpath = os.path.join(root, "utils/model.py")
    for fn in ("convert_gptq_v1_to_v2_format_module", "convert_gptq_v2_to_v1_format_module"):
        exec(compile("from __future__ import annotations\n" + _function_source(mpath, fn), mpath, "exec"), conv_ns)
    # qlinear/torch.py TorchLinear.train() imports this name from utils.model: give it the same function
    _stub("gptqmodel.utils.model", convert_gptq_v1_to_v2_format_module=conv_ns["convert_gptq_v1_to_v2_format_module"])
    ver = {}
    exec(open(os.path.join(root, "version.py")).read(), ver)
    return types.SimpleNamespace(cfg=cfg, quantizer=quantizer, qlinear=qlinear, qtorch=qtorch, backend=backend,
                                 conv=conv_ns, md=md_ns, version=ver["__version__"])


# ----------------------------------------------------------------------------------------------
# quantization (GPTQModel's RTN loop: Quantizer.find_params + Quantizer.quantize per group)
# ----------------------------------------------------------------------------------------------
def rtn_params(G, qcfg, W, group_size, perm=None):
    """Per-group min/max parameters exactly as GPTQModel computes them (quantization/rtn.py RTN.quantize;
    with desc_act the group loop of quantization/gptq.py GPTQ.quantize over the permuted columns).
    Returns (Q in W's dtype, scale [N, G] fp32, zero [N, G] fp32, g_idx int32 [K])."""
    quantizer = G.quantizer.Quantizer(qcfg=qcfg, name="fixture")
    quantizer.configure(perchannel=True)
    Wf = W.float()
    N, K = Wf.shape
    gs = group_size if group_size != -1 else K
    if perm is not None:
        Wf = Wf[:, perm]
    Q = torch.empty_like(Wf)
    scales, zeros = [], []
    for start in range(0, K, gs):
        block = Wf[:, start:start + gs]
        quantizer.find_params(block, weight=True)
        Q[:, start:start + gs] = quantizer.quantize(block)
        scales.append(quantizer.scale)
        zeros.append(quantizer.zero)
    g_idx = torch.tensor([i // gs for i in range(K)], dtype=torch.int32)
    if perm is not None:  # as GPTQ.quantize does for desc_act: undo the permutation of Q and g_idx
        invperm = torch.argsort(perm)
        Q = Q[:, invperm]
        g_idx = g_idx[invperm]
    return Q.to(W.dtype), torch.cat(scales, dim=1), torch.cat(zeros, dim=1), g_idx


def make_qcfg(G, bits, group_size, sym, desc_act, fmt):
    FORMAT = G.cfg.FORMAT
    qcfg = G.cfg.QuantizeConfig(bits=bits, group_size=group_size, sym=sym, desc_act=desc_act,
                                act_group_aware=False, format={"gptq": FORMAT.GPTQ, "gptq_v2": FORMAT.GPTQ_V2}[fmt],
                                offload_to_disk=False)
    # the meta fields models/writer.py save_quantized() sets before `config.quantization_config = to_dict()`
    qcfg.meta_set_versionable(key=G.cfg.META_FIELD_QUANTIZER, value=[f"{G.cfg.META_QUANTIZER_GPTQMODEL}:{G.version}"])
    qcfg.meta_set(key=G.cfg.META_FIELD_URI, value=G.cfg.META_VALUE_URI)
    qcfg.meta_set(key=G.cfg.META_FIELD_DAMP_PERCENT, value=getattr(qcfg, "damp_percent", None))
    qcfg.meta_set(key=G.cfg.META_FIELD_DAMP_AUTO_INCREMENT, value=getattr(qcfg, "damp_auto_increment", None))
    qcfg.meta_set(key=G.cfg.META_FIELD_STATIC_GROUPS, value=getattr(qcfg, "static_groups", None))
    qcfg.meta_set(key=G.cfg.META_FIELD_TRUE_SEQUENTIAL, value=qcfg.true_sequential)
    qcfg.meta_set(key=G.cfg.META_FIELD_MSE, value=getattr(qcfg, "mse", None))
    qcfg.meta_set(key=G.cfg.META_FIELD_GPTAQ_ENABLED, value=None)
    qcfg.meta_set(key=G.cfg.META_FIELD_FOEM_ENABLED, value=None)
    qcfg.meta_set(key=G.cfg.META_FIELD_ACT_GROUP_AWARE, value=getattr(qcfg, "act_group_aware", None))
    return qcfg


def new_qlinear(G, qcfg, K, N, register_buffers):
    return G.qtorch.TorchLinear(bits=qcfg.bits, group_size=qcfg.group_size, sym=qcfg.sym, desc_act=qcfg.desc_act,
                                in_features=K, out_features=N, bias=False, pack_dtype=torch.int32,
                                register_buffers=register_buffers, format=qcfg.format)


def quantize_linear(G, qcfg, W, perm):
    """Quantize one [N, K] weight and pack it as GPTQModel's pack_module() does. Returns the tensors saved."""
    N, K = W.shape
    Q, scale, zero, g_idx = rtn_params(G, qcfg, W, qcfg.group_size, perm)
    linear = torch.nn.Linear(K, N, bias=False)
    linear.weight.data = Q  # GPTQProcessor: module.weight.data = wq (model dtype), then pack_module()
    m = new_qlinear(G, qcfg, K, N, register_buffers=False)  # create_quant_module(register_buffers=False)
    m.pack_block(linear=linear, scales=scale, zeros=zero, g_idx=g_idx)  # default pack_impl "cpu" -> pack_block
    # cross-check: the legacy pack_original gives the same words
    m2 = new_qlinear(G, qcfg, K, N, register_buffers=False)
    # (int64 g_idx here only because torch 1.13 cannot index with int32, which torch >= 2 accepts)
    m2.pack_original(linear=linear, scales=scale.clone(), zeros=zero.clone(), g_idx=g_idx.long())
    for b in ("qweight", "qzeros", "scales"):
        assert torch.equal(getattr(m, b), getattr(m2, b)), b
    assert m.g_idx.dtype == torch.int32 and torch.equal(m.g_idx.long(), m2.g_idx)
    if torch.cuda.is_available():  # cross-check: pack_impl="gpu" (PackableQuantLinear.pack_gpu) packs the same
        m3 = new_qlinear(G, qcfg, K, N, register_buffers=False)
        m3.pack_gpu(linear=linear, scales=scale.clone(), zeros=zero.clone(), g_idx=g_idx.clone(), device="cuda")
        for b in ("qweight", "qzeros", "scales", "g_idx"):
            assert torch.equal(getattr(m, b), getattr(m3, b).cpu()), "pack_gpu " + b
    # zero points of 0, by position in their word: in v1 the word-level "-1" borrows from the next field
    # ("inner") or wraps past bit 31 ("top")
    zf = (zero.T == 0).reshape(zero.shape[1], -1, 32 // qcfg.bits) if qcfg.bits in (2, 4, 8) else None
    stats = {"zero_is_0": int((zero == 0).sum()), "fields": zero.numel(),
             "inner": int(zf[..., :-1].sum()) if zf is not None else 0, "top": int(zf[..., -1].sum()) if zf is not None else 0}
    if qcfg.format == G.cfg.FORMAT.GPTQ and getattr(type(m), "REQUIRES_FORMAT_V2", False):
        G.conv["convert_gptq_v2_to_v1_format_module"](module=m, quantize_config=qcfg)
    return {"qweight": m.qweight.clone(), "qzeros": m.qzeros.clone(), "scales": m.scales.clone(),
            "g_idx": m.g_idx.clone()}, stats


def dequant_reference(G, qcfg, K, N, tensors, fmt):
    """The tool's load path: TorchLinear buffers <- checkpoint, v1 -> v2 if checkpoint_format == gptq,
    eval(), dequantize_weight(). Returns [N, K] (the Linear orientation) in the dtype the tool returns."""
    m = new_qlinear(G, qcfg, K, N, register_buffers=True)
    for b in ("qweight", "qzeros", "scales", "g_idx"):
        assert getattr(m, b).shape == tensors[b].shape and getattr(m, b).dtype == tensors[b].dtype, b
        getattr(m, b).copy_(tensors[b])
    if fmt == "gptq" and m.REQUIRES_FORMAT_V2:
        G.conv["convert_gptq_v1_to_v2_format_module"](module=m, bits=qcfg.bits, pack_dtype=torch.int32)
    m.train()
    w_train = m.dequantize_weight()  # PackableQuantLinear.dequantize_weight (all bit widths)
    m.eval()
    w_eval = m.dequantize_weight()  # TorchLinear eval fast path for 2/4/8 (3-bit: same as train)
    assert w_eval.dtype == w_train.dtype and torch.equal(w_eval, w_train)
    n_gpu = None
    if torch.cuda.is_available():  # the same load on the GPU: TorchLinear's Triton dequant kernel when present
        mg = new_qlinear(G, qcfg, K, N, register_buffers=True)
        for b in ("qweight", "qzeros", "scales", "g_idx"):
            getattr(mg, b).copy_(tensors[b])
        if fmt == "gptq" and mg.REQUIRES_FORMAT_V2:
            G.conv["convert_gptq_v1_to_v2_format_module"](module=mg, bits=qcfg.bits, pack_dtype=torch.int32)
        mg = mg.to("cuda").eval()
        wg = mg.dequantize_weight()
        assert wg.dtype == w_eval.dtype
        n_gpu = (int((wg.cpu() != w_eval).sum()), "triton" if mg._can_use_triton_dequant() and mg._triton_dequant_enabled else "torch")
    # second opinion: utils/model_dequant.py convert_gptq_file arithmetic (offline dequantize_model)
    qz = tensors["qzeros"]
    if G.md["_uses_gptq_v1_qzeros"]({"checkpoint_format": fmt}):
        qz = G.md["_correct_gptq_v1_qzeros"](qz, qcfg.bits, planar=False)
    wi = G.md["unpack_rows"](tensors["qweight"], qcfg.bits, planar=False)
    zi = G.md["unpack_cols"](qz, qcfg.bits, planar=False)
    gi = tensors["g_idx"].long()
    off = ((wi.float() - zi.float()[gi]) * tensors["scales"].float()[gi]).to(torch.float16)
    n_off = int((off != w_eval).sum())
    return w_eval.T.contiguous(), n_off, n_gpu


# ----------------------------------------------------------------------------------------------
# models
# ----------------------------------------------------------------------------------------------
LLAMA_LINEARS = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                 "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj")


def is_quantized_weight(name):
    if not name.startswith("model.layers.") or not name.endswith(".weight"):
        return False
    if ".self_attn." in name and name.split(".")[-2] in ("q_proj", "k_proj", "v_proj", "o_proj"):
        return True
    if ".mlp." in name and name.split(".")[-2] in ("gate_proj", "up_proj", "down_proj"):
        return True
    return ".experts." in name and name.split(".")[-2] in ("w1", "w2", "w3")


def make_moe(seed):
    """A tiny Mixtral state dict: BF16, N(0, 0.02) with ~0.2% outliers at 20x; norms N(1, 0.1)."""
    g = torch.Generator().manual_seed(seed)
    H, I, E, L, V, NQ, NKV, HD = 256, 512, 4, 2, 512, 4, 2, 64

    def w(*shape):
        x = torch.randn(*shape, generator=g) * 0.02
        mask = torch.rand(*shape, generator=g) < 0.002
        return torch.where(mask, x * 20, x).to(torch.bfloat16)

    def norm():
        return (1 + 0.1 * torch.randn(H, generator=g)).to(torch.bfloat16)

    sd = {"model.embed_tokens.weight": w(V, H)}
    for l in range(L):
        p = f"model.layers.{l}."
        sd[p + "input_layernorm.weight"] = norm()
        sd[p + "self_attn.q_proj.weight"] = w(NQ * HD, H)
        sd[p + "self_attn.k_proj.weight"] = w(NKV * HD, H)
        sd[p + "self_attn.v_proj.weight"] = w(NKV * HD, H)
        sd[p + "self_attn.o_proj.weight"] = w(H, NQ * HD)
        sd[p + "post_attention_layernorm.weight"] = norm()
        sd[p + "block_sparse_moe.gate.weight"] = w(E, H)
        for e in range(E):
            q = p + f"block_sparse_moe.experts.{e}."
            sd[q + "w1.weight"] = w(I, H)
            sd[q + "w2.weight"] = w(H, I)
            sd[q + "w3.weight"] = w(I, H)
    sd["model.norm.weight"] = norm()
    sd["lm_head.weight"] = w(V, H)
    config = {
        "architectures": ["MixtralForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 1, "dtype": "bfloat16",
        "eos_token_id": 2, "head_dim": HD, "hidden_act": "silu", "hidden_size": H, "initializer_range": 0.02,
        "intermediate_size": I, "max_position_embeddings": 256, "model_type": "mixtral",
        "num_attention_heads": NQ, "num_experts_per_tok": 2, "num_hidden_layers": L, "num_key_value_heads": NKV,
        "num_local_experts": E, "output_router_logits": False, "rms_norm_eps": 1e-05,
        "rope_parameters": {"rope_theta": 1000000.0, "rope_type": "default"}, "router_aux_loss_coef": 0.001,
        "router_jitter_noise": 0.0, "sliding_window": None, "tie_word_embeddings": False,
        "transformers_version": "5.17.0", "use_cache": True, "vocab_size": V,
    }
    return sd, config


VARIANTS = [
    # name, source, bits, group_size, sym, desc_act, checkpoint_format
    ("llama-gptq-4bit-g128-sym-v1", "llama", 4, 128, True, False, "gptq"),
    ("llama-gptq-4bit-g64-asym-descact-v1", "llama", 4, 64, False, True, "gptq"),
    ("llama-gptq-8bit-channel-sym-v2", "llama", 8, -1, True, False, "gptq_v2"),
    ("llama-gptq-3bit-g128-asym-v1", "llama", 3, 128, False, False, "gptq"),
    ("llama-gptq-2bit-g64-asym-v2", "llama", 2, 64, False, False, "gptq_v2"),
    ("moe-gptq-4bit-g128", "moe", 4, 128, True, False, "gptq"),
]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tool-src", required=True, help="directory holding GPTQModel's gptqmodel/ package")
    ap.add_argument("--llama", default=os.path.join(REPO, "tests/data/fixtures/llama-bf16"))
    ap.add_argument("--out", default=os.path.join(REPO, "tests/data/fixtures"))
    ap.add_argument("--refs", default=None, help="reference folder (default <out>/refs)")
    ap.add_argument("--all-refs", action="store_true",
                    help="write the reference of every quantized weight (default: the subset in REF_SUBSET)")
    ap.add_argument("--only", default=None, help="comma-separated variant names")
    ap.add_argument("--seed", type=int, default=20260829)
    args = ap.parse_args()
    refs_dir = args.refs or os.path.join(args.out, "refs")
    torch.manual_seed(0)

    G = load_gptqmodel(args.tool_src)
    print(f"GPTQModel {G.version} from {args.tool_src}; torch {torch.__version__}, CUDA {torch.cuda.is_available()}")

    llama_sd = read_checkpoint(args.llama)
    llama_cfg = json.load(open(os.path.join(args.llama, "config.json")))
    moe_sd, moe_cfg = make_moe(args.seed)

    only = set(args.only.split(",")) if args.only else None
    for name, source, bits, gs, sym, desc_act, fmt in VARIANTS:
        if only and name not in only:
            continue
        sd, cfg = (llama_sd, llama_cfg) if source == "llama" else (moe_sd, moe_cfg)
        qcfg = make_qcfg(G, bits, gs, sym, desc_act, fmt)
        out = {}
        zero0 = fields = 0
        borrow_weights = set()  # v1 2/4/8-bit weights with a zero of 0: their word-level -1 borrows
        for wname in sorted(sd):
            W = sd[wname]
            if not is_quantized_weight(wname):
                out[wname] = W  # GPTQModel saves non-quantized tensors in the model dtype (bf16 here)
                continue
            prefix = wname[:-len(".weight")]
            perm = None
            if desc_act:  # deterministic stand-in for argsort(diag(H), descending=True)
                h = int(hashlib.sha256(f"{args.seed}:{wname}".encode()).hexdigest()[:8], 16)
                perm = torch.randperm(W.shape[1], generator=torch.Generator().manual_seed(h))
            tensors, st = quantize_linear(G, qcfg, W, perm)
            zero0 += st["zero_is_0"]
            if fmt == "gptq" and bits in (2, 4, 8):
                for kind in ("inner", "top"):
                    if st[kind]:
                        borrow_weights.add((kind, W.numel(), wname))
            fields += st["fields"]
            for k, v in tensors.items():
                out[f"{prefix}.{k}"] = v
        folder = os.path.join(args.out, name)
        st_write(os.path.join(folder, "model.safetensors"), out)
        config = dict(cfg)
        config["quantization_config"] = qcfg.to_dict()
        with open(os.path.join(folder, "config.json"), "w") as f:
            f.write(json.dumps(json.loads(json.dumps(config)), indent=2, sort_keys=True) + "\n")
        qcfg.save_pretrained(folder)  # quantize_config.json, as save_quantized() writes it

        # one weight (the smallest) for each kind of v1 borrow joins the committed references
        borrow_refs = {min(b for b in borrow_weights if b[0] == kind)[2]
                       for kind in ("inner", "top") if any(b[0] == kind for b in borrow_weights)}
        # references, from the bytes just written
        back = st_read(os.path.join(folder, "model.safetensors"))
        refs, n_off_total, gpu_checks = {}, 0, []
        qnames = sorted(k[:-len(".qweight")] for k in back if k.endswith(".qweight"))
        for prefix in qnames:
            W = sd[prefix + ".weight"]
            N, K = W.shape
            t = {b: back[f"{prefix}.{b}"] for b in ("qweight", "qzeros", "scales", "g_idx")}
            ref, n_off, n_gpu = dequant_reference(G, qcfg, K, N, t, fmt)
            n_off_total += n_off
            if n_gpu is not None:
                gpu_checks.append(n_gpu)
            if args.all_refs or prefix + ".weight" in REF_SUBSET[source] | borrow_refs:
                refs[prefix + ".weight"] = ref
        st_write(os.path.join(refs_dir, f"{name}.dequant.gptqmodel.safetensors"), refs)
        print(f"{name}: {len(qnames)} quantized Linears, zero==0 fields {zero0}/{fields}, "
              f"offline-dequant (model_dequant.py) elements differing from TorchLinear: {n_off_total}, "
              f"refs {len(refs)} tensors ({next(iter(refs.values())).dtype}); v1 zero==0 (kind, size, weight) {sorted(borrow_weights)}")
        if gpu_checks:
            print(f"  GPU load path ({sorted(set(k for _, k in gpu_checks))}) elements differing from the CPU "
                  f"reference: {sum(n for n, _ in gpu_checks)}; pack_gpu == pack_block: yes")


# The committed references (to keep the data small; --all-refs writes every weight): two [128, 256]
# projections from different layers, one expert for the MoE, plus, in a v1 2/4/8-bit variant, the smallest
# weight holding a zero point of 0 below the top field of its word (the v2 -> v1 word subtraction borrows
# from the next field there) and the smallest holding one in the top field (the subtraction wraps past bit 31).
REF_SUBSET = {
    "llama": {"model.layers.0.self_attn.k_proj.weight", "model.layers.1.self_attn.v_proj.weight"},
    "moe": {"model.layers.0.self_attn.k_proj.weight", "model.layers.1.block_sparse_moe.experts.2.w2.weight"},
}

if __name__ == "__main__":
    main()
