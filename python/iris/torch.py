"""PyTorch on iris's kernels: load an archive onto the GPU with libiris's upload pipeline
(include/iris/iris_cuda.h), keep quantized weights quantized there, and run them with the
fused dequant-GEMV (batch <= 16) or dequant + cuBLAS above.

    sd = iris.torch.load("model.iris")          # name -> torch.Tensor | QuantTensor
    y = torch.nn.functional.linear(x, sd["model.layers.0.mlp.down_proj.weight"])
    iris.torch.patch(model, "model.iris")       # a transformers model on iris modules

Every tensor lives in the one device allocation libiris made for the archive: unquantized
ones are torch views of it (no copy), quantized ones are QuantTensors over their components.
The kernels run on torch's current stream; nothing synchronizes."""

from __future__ import annotations

import ctypes
import math
import threading

import numpy as np
import torch

from . import _format, _native
from ._archive import Archive
from ._archive import open as _open
from ._errors import IrisError

_C_DTYPE = {torch.float32: 11, torch.float16: 9, torch.bfloat16: 10}  # iris_dtype values
_BF16 = _C_DTYPE[torch.bfloat16]
_TORCH_DTYPE = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16, "f64": torch.float64,
                "u8": torch.uint8, "i8": torch.int8, "i16": torch.int16, "i32": torch.int32, "i64": torch.int64,
                "bool": torch.bool, "u16": torch.uint16, "u32": torch.uint32, "u64": torch.uint64,
                "f8_e4m3": torch.float8_e4m3fn, "f8_e5m2": torch.float8_e5m2}
# __cuda_array_interface__ type strings of same-width stand-ins; the tensor is viewed back.
_TYPESTR = {1: "|u1", 2: "<i2", 4: "<i4", 8: "<i8"}
_ROLES = {role: i for i, role in enumerate(_format.ROLES)}  # iris_role values


class _UploadOptions(ctypes.Structure):
    _fields_ = [("device", ctypes.c_int), ("names", ctypes.POINTER(ctypes.c_char_p)), ("n_names", ctypes.c_uint64),
                ("staging_bytes", ctypes.c_uint64), ("staging_buffers", ctypes.c_uint32), ("threads", ctypes.c_int),
                ("verify", ctypes.c_uint32), ("reserved", ctypes.c_uint64 * 4)]


def _lib():
    lib = _native.library()
    if lib is None:
        raise IrisError(f"iris.torch needs libiris: {_native.why_not()}")
    if getattr(lib, "_iris_torch_declared", False):
        return lib
    vp, sz, msg = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p
    lib.iris_has_cuda.restype = ctypes.c_int
    lib.iris_upload_options_init.argtypes = [ctypes.POINTER(_UploadOptions)]
    lib.iris_cuda_upload.argtypes = [vp, ctypes.POINTER(_UploadOptions), ctypes.POINTER(vp), msg, sz]
    lib.iris_cuda_archive_free.argtypes = [vp]
    lib.iris_cuda_archive_free.restype = None
    lib.iris_cuda_archive_device_bytes.argtypes = [vp]
    lib.iris_cuda_archive_device_bytes.restype = ctypes.c_uint64
    lib.iris_cuda_archive_upload_seconds.argtypes = [vp]
    lib.iris_cuda_archive_upload_seconds.restype = ctypes.c_double
    lib.iris_cuda_archive_find_tensor.argtypes = [vp, ctypes.c_char_p, ctypes.POINTER(vp), msg, sz]
    lib.iris_cuda_tensor_component.argtypes = [vp, ctypes.c_int]
    lib.iris_cuda_tensor_component.restype = vp
    lib.iris_cuda_dequantize.argtypes = [vp, ctypes.c_int, vp, sz, vp, msg, sz]
    lib.iris_cuda_gemv.argtypes = [vp, vp, ctypes.c_int, vp, ctypes.c_int, vp, msg, sz]
    lib.iris_cuda_gemv_uses_tensor_cores.argtypes = [vp, ctypes.c_int]
    lib.iris_cuda_gemv_matrix.argtypes = [vp, ctypes.c_uint64, vp, ctypes.c_int, vp, ctypes.c_int, vp, msg, sz]
    lib.iris_cuda_experts_create.argtypes = [ctypes.POINTER(vp), ctypes.c_uint64, ctypes.POINTER(vp), msg, sz]
    lib.iris_cuda_experts_free.argtypes = [vp]
    lib.iris_cuda_experts_free.restype = None
    for f in ("count", "n", "k"):
        getattr(lib, f"iris_cuda_experts_{f}").argtypes = [vp]
        getattr(lib, f"iris_cuda_experts_{f}").restype = ctypes.c_uint64
    lib.iris_cuda_experts_use_tensor_cores.argtypes = [vp]
    lib.iris_cuda_gemv_experts.argtypes = [vp, vp, vp, ctypes.c_uint64, vp, ctypes.c_uint64, vp, ctypes.c_int, vp, msg, sz]
    lib._iris_torch_declared = True
    return lib


def _check(code: int, buf) -> None:
    if code != 0:
        _native._raise(code, buf)


_local = threading.local()


def _msg():
    """A per-thread message buffer, reused: the kernel calls sit on the decode path."""
    buf = getattr(_local, "msg", None)
    if buf is None:
        buf = _local.msg = ctypes.create_string_buffer(1024)
    return buf


def _gemv_rows(x: torch.Tensor, n: int, k: int, launch) -> torch.Tensor:
    """x [..., K] times an [N, K] weight through `launch(x_ptr, rows, y_ptr, stream)`, one fused
    GEMV of at most 16 rows per call (BF16 in and out, x's dtype returned)."""
    lead = x.shape[:-1]
    rows = math.prod(lead)
    xb = x.reshape(rows, k)
    if xb.dtype != torch.bfloat16 or not xb.is_contiguous():
        xb = xb.to(torch.bfloat16).contiguous()
    y = torch.empty(rows, n, dtype=torch.bfloat16, device=x.device)
    stream = torch.cuda.current_stream(x.device).cuda_stream
    for r0 in range(0, rows, 16):
        launch(xb[r0:].data_ptr(), min(16, rows - r0), y[r0:].data_ptr(), stream)
    y = y.reshape(*lead, n)
    return y if x.dtype == torch.bfloat16 else y.to(x.dtype)


class DeviceArchive:
    """libiris's device copy of an archive (iris_cuda_archive); freed when the last tensor
    that views it is gone."""

    def __init__(self, archive: Archive, device: torch.device, names=None):
        lib = _lib()
        if not lib.iris_has_cuda():
            raise IrisError("this libiris was built without CUDA")
        opts = _UploadOptions()
        lib.iris_upload_options_init(ctypes.byref(opts))
        opts.device = device.index if device.index is not None else torch.cuda.current_device()
        if names is not None:
            encoded = [n.encode() for n in names]
            self._names = (ctypes.c_char_p * len(encoded))(*encoded)
            opts.names, opts.n_names = self._names, len(encoded)
        msg = ctypes.create_string_buffer(1024)
        out = ctypes.c_void_p()
        _check(lib.iris_cuda_upload(_native.handle(archive), ctypes.byref(opts), ctypes.byref(out), msg, len(msg)), msg)
        self._lib, self.handle, self.device = lib, out, device
        self.device_bytes = lib.iris_cuda_archive_device_bytes(out)
        self.upload_seconds = lib.iris_cuda_archive_upload_seconds(out)

    def tensor(self, name: str) -> ctypes.c_void_p:
        msg = ctypes.create_string_buffer(1024)
        t = ctypes.c_void_p()
        _check(self._lib.iris_cuda_archive_find_tensor(self.handle, name.encode(), ctypes.byref(t), msg, len(msg)), msg)
        return t

    def __del__(self):
        if getattr(self, "handle", None):
            self._lib.iris_cuda_archive_free(self.handle)
            self.handle = None


class _CudaView:
    """Device memory of a DeviceArchive as __cuda_array_interface__ (torch keeps this object,
    and so the archive, alive as long as the tensor's storage). torch only takes writable
    views: writing to such a tensor changes the device copy, never the archive file."""

    def __init__(self, owner: DeviceArchive, ptr: int, nbytes: int, itemsize: int):
        self._owner = owner
        self.__cuda_array_interface__ = {"shape": (nbytes // itemsize,), "typestr": _TYPESTR[itemsize],
                                         "data": (ptr, False), "version": 3, "strides": None, "stream": None}


def _device_tensor(owner: DeviceArchive, ptr: int, shape, dtype: torch.dtype) -> torch.Tensor:
    itemsize = torch.empty(0, dtype=dtype).element_size()
    n = int(np.prod(shape, dtype=np.int64)) if len(shape) else 1
    if n == 0:
        return torch.empty(shape, dtype=dtype, device=owner.device)
    flat = torch.as_tensor(_CudaView(owner, ptr, n * itemsize, itemsize), device=owner.device)
    return flat.view(dtype).view(shape)


class QuantTensor:
    """A quantized weight on the GPU, [..., N, K] as the archive stores it. Its bytes are
    never expanded to BF16 except by dequantize() or a matmul above batch 16."""

    def __init__(self, owner: DeviceArchive, name: str, tensor, shape, dtype: torch.dtype, fmt: str, tiled: bool):
        self._owner, self._t, self.name = owner, tensor, name
        self._gemv = owner._lib.iris_cuda_gemv  # looked up once: linear() is on the decode path
        self.shape, self.dtype, self.format, self.tiled = torch.Size(shape), dtype, fmt, tiled
        self.device = owner.device

    @property
    def T(self) -> "_Transposed":  # noqa: N802 - mirrors torch.Tensor.T
        return _Transposed(self)

    def dim(self) -> int:
        return len(self.shape)

    def component_address(self, role: str) -> int | None:
        """The device address of a component (FORMAT.md section 4), for kernels of your own."""
        ptr = self._owner._lib.iris_cuda_tensor_component(self._t, _ROLES[role])
        return int(ptr) if ptr else None

    def dequantize(self, dtype: torch.dtype | None = None) -> torch.Tensor:
        """One kernel launch on the current stream; bit for bit the CPU reference."""
        dtype = dtype or self.dtype
        if dtype not in _C_DTYPE:
            raise IrisError(f"tensor '{self.name}': dequantize to float32, float16 or bfloat16, not {dtype}")
        out = torch.empty(self.shape, dtype=dtype, device=self.device)
        msg = ctypes.create_string_buffer(1024)
        stream = torch.cuda.current_stream(self.device).cuda_stream
        _check(self._owner._lib.iris_cuda_dequantize(self._t, _C_DTYPE[dtype], out.data_ptr(), out.numel() * out.element_size(),
                                                     stream, msg, len(msg)), msg)
        return out

    def linear(self, x: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
        """x @ W.T (+ bias) for W = this [N, K] weight: the fused GEMV for up to 16 rows of x,
        dequantize + cuBLAS above."""
        if len(self.shape) != 2:
            raise IrisError(f"tensor '{self.name}': linear needs a [N, K] weight, this one is {list(self.shape)}")
        n, k = self.shape
        if x.shape[-1] != k:
            raise IrisError(f"tensor '{self.name}': x has {x.shape[-1]} features, the weight {k}")
        if 1 <= math.prod(x.shape[:-1]) <= 16 and self.tiled and x.is_cuda:
            msg = _msg()
            y = _gemv_rows(x, n, k, lambda xp, b, yp, stream: _check(self._gemv(self._t, xp, b, yp, _BF16, stream, msg, len(msg)), msg))
        else:
            y = torch.nn.functional.linear(x, self.dequantize(x.dtype if x.dtype in _C_DTYPE else torch.bfloat16))
        return y + bias if bias is not None else y

    def expert(self, m: int) -> "ExpertWeight":
        """Matrix m of an [E, N, K] stack (an MoE expert), for linear()."""
        return ExpertWeight(self, m)

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is torch.nn.functional.linear:
            x, w = args[0], args[1]
            b = args[2] if len(args) > 2 else kwargs.get("bias")
            if isinstance(w, QuantTensor):
                return w.linear(x, b)
        if func in (torch.matmul, torch.Tensor.__matmul__) and isinstance(args[1], _Transposed):
            return args[1].weight.linear(args[0])
        return NotImplemented

    def __repr__(self) -> str:
        return f"QuantTensor({self.name!r}, shape={list(self.shape)}, format={self.format!r}, device={self.device})"


class ExpertWeight:
    """One [N, K] matrix of a quantized [E, N, K] expert stack: linear() runs the fused GEMV on
    that expert's tiles alone (iris_cuda_gemv_matrix), 16 rows of x at a time."""

    def __init__(self, stack: QuantTensor, m: int):
        if len(stack.shape) != 3 or not stack.tiled:
            raise IrisError(f"tensor '{stack.name}': expert() needs a tiled [E, N, K] stack")
        if not 0 <= m < stack.shape[0]:
            raise IrisError(f"tensor '{stack.name}': expert {m} of {stack.shape[0]}")
        self.stack, self.m = stack, m
        self.shape = torch.Size(stack.shape[1:])

    def linear(self, x: torch.Tensor) -> torch.Tensor:
        n, k = self.shape
        fn, t, m, msg = self.stack._owner._lib.iris_cuda_gemv_matrix, self.stack._t, self.m, _msg()
        return _gemv_rows(x, n, k, lambda xp, b, yp, stream: _check(fn(t, m, xp, b, yp, _BF16, stream, msg, len(msg)), msg))


class Experts:
    """The experts of one MoE projection, for the grouped expert GEMV (iris_cuda_gemv_experts):
    the E matrices of a quantized [E, N, K] stack (gpt-oss), or a list of quantized [N, K]
    tensors of one format and geometry (Mixtral's per-expert weights). gemv() multiplies each
    (token, expert) pair the router chose in one launch that reads only those experts' tiles;
    the indices stay on the GPU, so nothing synchronizes."""

    def __init__(self, tensors):
        tensors = [tensors] if isinstance(tensors, QuantTensor) else list(tensors)
        if not tensors or not all(isinstance(t, QuantTensor) for t in tensors):
            raise IrisError("Experts takes a QuantTensor stack or a list of QuantTensors")
        owner = tensors[0]._owner
        self._lib, self._tensors, self.name = owner._lib, tensors, tensors[0].name
        self.device = tensors[0].device
        handles = (ctypes.c_void_p * len(tensors))(*[t._t.value for t in tensors])
        out, msg = ctypes.c_void_p(), ctypes.create_string_buffer(1024)
        _check(self._lib.iris_cuda_experts_create(handles, len(tensors), ctypes.byref(out), msg, len(msg)), msg)
        self._h = out
        self.count = int(self._lib.iris_cuda_experts_count(out))
        self.n, self.k = int(self._lib.iris_cuda_experts_n(out)), int(self._lib.iris_cuda_experts_k(out))
        # True: gemv runs on the tensor cores (BF16 operands), else FP32 CUDA cores (error bounds).
        self.tensor_cores = bool(self._lib.iris_cuda_experts_use_tensor_cores(out))

    def gemv(self, x: torch.Tensor, expert_ids: torch.Tensor, x_rows: torch.Tensor | None = None) -> torch.Tensor:
        """y[p] = W[expert_ids[p]] @ x[x_rows[p]] (x_rows None: x[p]) for every pair p; x is
        [T, K], the result [P, N] in x's dtype (BF16 operands, FP32 accumulation). A pair with
        an index out of range gets a NaN row."""
        if x.dim() != 2 or x.shape[1] != self.k:
            raise IrisError(f"tensor '{self.name}': x must be [T, {self.k}], got {list(x.shape)}")
        xb = x if x.dtype == torch.bfloat16 and x.is_contiguous() and x.data_ptr() % 16 == 0 else x.to(torch.bfloat16).contiguous()
        if xb.data_ptr() % 16:
            xb = xb.clone()
        ids = expert_ids.reshape(-1).to(device=x.device, dtype=torch.int32).contiguous()
        rows = None if x_rows is None else x_rows.reshape(-1).to(device=x.device, dtype=torch.int32).contiguous()
        if rows is not None and rows.numel() != ids.numel():
            raise IrisError(f"tensor '{self.name}': {ids.numel()} expert ids but {rows.numel()} rows")
        y = torch.empty(ids.numel(), self.n, dtype=torch.bfloat16, device=x.device)
        msg = _msg()
        stream = torch.cuda.current_stream(x.device).cuda_stream
        _check(self._lib.iris_cuda_gemv_experts(self._h, ids.data_ptr(), rows.data_ptr() if rows is not None else None, ids.numel(),
                                                xb.data_ptr(), xb.shape[0], y.data_ptr(), _BF16, stream, msg, len(msg)), msg)
        return y if x.dtype == torch.bfloat16 else y.to(x.dtype)

    def __del__(self):
        h = getattr(self, "_h", None)
        if h:
            self._lib.iris_cuda_experts_free(h)
            self._h = None


class _Transposed:
    """W.T of a QuantTensor, so that `x @ w.T` runs the GEMV."""

    def __init__(self, weight: QuantTensor):
        self.weight = weight

    def __rmatmul__(self, x):
        return self.weight.linear(x)

    __torch_function__ = QuantTensor.__torch_function__


def load(path, device="cuda", names=None) -> dict:
    """Uploads the archive (or the named tensors) with libiris's pipeline; returns name ->
    torch.Tensor (unquantized: views of the device copy) or QuantTensor (quantized)."""
    device = torch.device(device)
    if device.type != "cuda":
        raise IrisError("iris.torch.load uploads to a CUDA device; use iris.open() for the CPU")
    if device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    archive = path if isinstance(path, Archive) else _open(path)
    owner = DeviceArchive(archive, device, names)
    lib = owner._lib
    out = {}
    for name, t in archive.tensors.items():
        if names is not None and name not in names:
            continue
        ct = owner.tensor(name)
        if not t.quantized:
            if t.dtype not in _TORCH_DTYPE:
                raise IrisError(f"{archive.path}: tensor '{name}': no torch dtype for {t.dtype}")
            ptr = lib.iris_cuda_tensor_component(ct, _ROLES["data"]) or 0
            out[name] = _device_tensor(owner, ptr, t.shape, _TORCH_DTYPE[t.dtype])
        else:
            out[name] = QuantTensor(owner, name, ct, t.shape, _TORCH_DTYPE.get(t.dtype, torch.bfloat16), t.format,
                                    t.layout["kind"] == "tiled")
    return out


class IrisLinear(torch.nn.Module):
    """nn.Linear with a quantized weight that stays quantized on the GPU."""

    def __init__(self, weight: QuantTensor, bias: torch.Tensor | None = None):
        super().__init__()
        self.weight = weight
        self.bias = torch.nn.Parameter(bias, requires_grad=False) if bias is not None else None
        self.out_features, self.in_features = weight.shape

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.weight.linear(x, self.bias)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, format={self.weight.format}"


def _pair_rows(cache: dict, tokens: int, top_k: int, device) -> torch.Tensor:
    """The token of each (token, expert) pair, [tokens * top_k] int32, made once per shape: the
    decode loop asks for the same one at every layer and step."""
    key = (tokens, top_k, device)
    rows = cache.get(key)
    if rows is None:
        rows = cache[key] = torch.arange(tokens, device=device, dtype=torch.int32).repeat_interleave(top_k)
    return rows


def _gpt_oss_gate(gate_up: torch.Tensor, alpha: float, limit: float) -> torch.Tensor:
    """gpt-oss's clamped SwiGLU on interleaved gate/up columns (transformers' GptOssExperts):
    gate = even columns clamped above at limit, up = odd columns clamped to [-limit, limit],
    (up + 1) * gate * sigmoid(alpha * gate)."""
    gate, up = gate_up[..., ::2], gate_up[..., 1::2]
    gate = gate.clamp(max=limit)
    up = up.clamp(min=-limit, max=limit)
    return (up + 1) * (gate * torch.sigmoid(gate * alpha))


class IrisGptOssExperts(torch.nn.Module):
    """transformers' GptOssExperts on quantized stacks: gate_up_proj [E, 2I, H] and down_proj
    [E, H, I] as the checkpoint stores them. Each projection is one grouped expert GEMV over
    the (token, expert) pairs the router chose, reading only those experts' tiles; the indices
    stay on the GPU. The gate is gpt-oss's, with alpha and limit copied off the replaced module
    as plain numbers: nothing here refers to that module, so it is freed once replaced (a bound
    method of it kept its BF16 weights alive, 38 GB for gpt-oss-20b)."""

    def __init__(self, original: torch.nn.Module, gate_up: QuantTensor, down: QuantTensor, gate_up_bias, down_bias,
                 config=None):
        super().__init__()
        self.num_experts = int(original.num_experts)
        # transformers' GptOssExperts: alpha 1.702, limit = config.swiglu_limit (7.0).
        self.alpha = float(getattr(original, "alpha", 1.702))
        self.limit = float(getattr(original, "limit", getattr(config, "swiglu_limit", 7.0)))
        self.gate_up, self.down = Experts(gate_up), Experts(down)
        self.gate_up_proj_bias, self.down_proj_bias = gate_up_bias, down_bias
        self._rows = {}

    def forward(self, hidden_states: torch.Tensor, router_indices=None, routing_weights=None) -> torch.Tensor:
        shape = hidden_states.shape
        x = hidden_states.reshape(-1, shape[-1])
        tokens, top_k = router_indices.shape
        ids = router_indices.reshape(-1).to(torch.int32)
        rows = _pair_rows(self._rows, tokens, top_k, x.device)
        picked = ids.long()
        gate_up = self.gate_up.gemv(x, ids, rows) + self.gate_up_proj_bias[picked]
        out = self.down.gemv(_gpt_oss_gate(gate_up, self.alpha, self.limit), ids) + self.down_proj_bias[picked]
        out = out * routing_weights.reshape(-1, 1)
        return out.view(tokens, top_k, -1).sum(dim=1).to(hidden_states.dtype).reshape(shape)

    def extra_repr(self) -> str:
        return f"num_experts={self.num_experts}, alpha={self.alpha}, limit={self.limit}"


def _activation(original: torch.nn.Module, config):
    """A fresh activation module: from the config's hidden_act through transformers' ACT2FN,
    else a deep copy of the replaced module's act_fn (never the replaced module's own object
    graph, which must be free to go)."""
    name = getattr(config, "hidden_act", None)
    if isinstance(name, str):
        try:
            from transformers.activations import ACT2FN

            return ACT2FN[name]
        except (ImportError, KeyError):
            pass
    import copy

    return copy.deepcopy(original.act_fn)


class IrisMixtralExperts(torch.nn.Module):
    """transformers' MixtralExperts on the checkpoint's per-expert quantized w1 (gate), w3 (up)
    and w2 (down): three grouped expert GEMVs over the (token, expert) pairs the router chose,
    reading only those experts' tiles. Holds nothing of the replaced module."""

    def __init__(self, original: torch.nn.Module, w1: list, w2: list, w3: list, config=None):
        super().__init__()
        self.num_experts = int(original.num_experts)
        self.act_fn = _activation(original, config)
        self.w1, self.w2, self.w3 = Experts(w1), Experts(w2), Experts(w3)
        self._rows = {}

    def forward(self, hidden_states: torch.Tensor, top_k_index: torch.Tensor, top_k_weights: torch.Tensor) -> torch.Tensor:
        tokens, top_k = top_k_index.shape
        ids = top_k_index.reshape(-1).to(torch.int32)
        rows = _pair_rows(self._rows, tokens, top_k, hidden_states.device)
        h = self.act_fn(self.w1.gemv(hidden_states, ids, rows)) * self.w3.gemv(hidden_states, ids, rows)
        out = self.w2.gemv(h, ids) * top_k_weights.reshape(-1, 1)
        return out.view(tokens, top_k, -1).sum(dim=1).to(hidden_states.dtype)


# -- archive names -> model parameters (transformers' checkpoint conversion rules)

class _Rule:
    """One of transformers' checkpoint conversion rules, read off its WeightRenaming or
    WeightConverter: source patterns (regexes, '*' standing for an expert index), one target,
    and for a converter the names and dims of its operations."""

    def __init__(self, rule):
        import re

        sources = _first_attr(rule, ("source_patterns", "source_keys"))
        targets = _first_attr(rule, ("target_patterns", "target_keys"))
        sources = [sources] if isinstance(sources, str) else list(sources or [])
        targets = [targets] if isinstance(targets, str) else list(targets or [])
        ops = getattr(rule, "operations", None)
        self.renaming = not ops
        self.operations = [(type(op).__name__, getattr(op, "dim", 0)) for op in (ops or [])]
        self.sources = sources
        self.target = targets[0] if len(targets) == 1 else None
        # A converter's '*' is an expert index (a captured integer); a renaming is a regex as is.
        self.patterns = [re.compile(src if self.renaming else re.escape(src).replace(r"\*", r"(\d+)")) for src in sources]

    def rename(self, name: str) -> str:
        for pattern in self.patterns:
            name = pattern.sub(self.target, name) if self.target is not None else name
        return name

    def match(self, name: str):
        """(target name, source index, expert index) when a converter takes this name."""
        for i, pattern in enumerate(self.patterns):
            m = pattern.search(name)
            if m:
                expert = int(m.group(1)) if m.groups() else 0
                return name[:m.start()] + self.target + name[m.end():], i, expert
        return None


def _first_attr(obj, names):
    for n in names:
        if hasattr(obj, n):
            return getattr(obj, n)
    return None


def _conversion_rules(model) -> list:
    """The model's checkpoint conversion rules from transformers (5.x), or [] where this
    transformers has none (4.x loads checkpoint names as they are)."""
    try:
        from transformers import conversion_mapping
    except ImportError:
        return []
    raw = None
    getter = getattr(conversion_mapping, "get_model_conversion_mapping", None)
    if getter is not None:
        try:
            raw = getter(model)
        except TypeError:
            raw = None
    if raw is None:
        getter = getattr(conversion_mapping, "get_checkpoint_conversion_mapping", None)
        model_type = getattr(getattr(model, "config", None), "model_type", None)
        raw = getter(model_type) if getter is not None and model_type else None
    return [_Rule(r) for r in raw or [] if _first_attr(r, ("source_patterns", "source_keys")) is not None]


class _Plan:
    """Where each archive tensor goes: `direct` maps a model name to one archive name;
    `groups` maps a model name to the rule and the archive names (by source pattern, then
    expert index) a converter merges into it."""

    def __init__(self, archive_names, model_names: set, rules: list):
        self.direct, self.groups = {}, {}
        renamings = [r for r in rules if r.renaming and r.target is not None]
        converters = [r for r in rules if not r.renaming and r.target is not None]
        for name in archive_names:
            renamed = name
            for r in renamings:
                renamed = r.rename(renamed)
            if renamed in model_names:
                self.direct[renamed] = name
            elif not self._take(name, renamed, converters, model_names):
                self.direct.setdefault(name, name)  # unknown to the model: reported as unused

    def _take(self, name: str, renamed: str, converters: list, model_names: set) -> bool:
        """Files `name` under the converter whose target the model has, if one takes it (its
        patterns are written against checkpoint names: tried on the name as stored, then as
        renamed)."""
        for rule in converters:
            for candidate in (name, renamed):
                found = rule.match(candidate)
                if found is not None and found[0] in model_names:
                    target, source, expert = found
                    self.groups.setdefault(target, (rule, {}))[1].setdefault(source, {})[expert] = name
                    return True
        return False

    def group_names(self, target: str) -> list:
        """The archive names merged into `target`, by source pattern, each in expert order."""
        rule, by_source = self.groups[target]
        return [[by_source[i][e] for e in sorted(by_source[i])] for i in sorted(by_source)]


def _merge(target: str, rule: _Rule, tensors: list, dtype) -> torch.Tensor:
    """Applies a converter's operations (transformers' MergeModulelist: stack each source's
    experts along dim; Concatenate: join the sources along dim) to the archive's tensors."""
    values = [[t.dequantize(dtype) if isinstance(t, QuantTensor) else t.to(dtype) for t in per_source] for per_source in tensors]
    for op, dim in rule.operations:
        if op == "MergeModulelist":
            values = [[torch.stack(v, dim=dim)] for v in values]
        elif op == "Concatenate":
            values = [[torch.cat([v[0] for v in values], dim=dim)]]
        else:
            raise IrisError(f"'{target}': iris cannot apply transformers' {op} conversion")
    if len(values) != 1 or len(values[0]) != 1:
        raise IrisError(f"'{target}': the conversion left {len(values)} tensors, not one")
    return values[0][0]


# -- patch

class PatchResult(dict):
    """What patch() returns: the state dict iris.torch.load produced (name -> tensor or
    QuantTensor; it owns the device memory, so keep it while the model runs), with
    `unset`: the model's parameters and persistent buffers the archive did not set, and
    `unused`: the archive's tensors the model took nothing from (both empty after a strict
    patch, which raises instead)."""

    def __init__(self, state_dict: dict, unset: list, unused: list):
        super().__init__(state_dict)
        self.unset, self.unused = unset, unused


def _module_and_leaf(model, name: str):
    parent, _, leaf = name.rpartition(".")
    return (model.get_submodule(parent) if parent else model), leaf


def _patch_experts(model: torch.nn.Module, sd: dict, plan: _Plan, used: set) -> int:
    """Replaces transformers' gpt-oss and Mixtral expert modules whose weights are quantized in
    the archive; returns how many were replaced. The archive names they take go into `used`."""
    replaced = 0
    config = getattr(model, "config", None)
    for name, module in list(model.named_modules()):
        kind = type(module).__name__
        if kind == "GptOssExperts":
            names = [plan.direct.get(f"{name}.{p}") for p in ("gate_up_proj", "down_proj", "gate_up_proj_bias", "down_proj_bias")]
            gu, dn, gub, dnb = (sd.get(n) if n else None for n in names)
            if isinstance(gu, QuantTensor) and isinstance(dn, QuantTensor):
                parent, leaf = _module_and_leaf(model, name)
                setattr(parent, leaf, IrisGptOssExperts(module, gu, dn, gub, dnb, config))
                used.update(n for n in names if n)
                replaced += 1
        elif kind == "MixtralExperts":
            w = _mixtral_expert_names(name, module, plan)
            if w and all(isinstance(sd.get(n), QuantTensor) for ns in w.values() for n in ns):
                parent, leaf = _module_and_leaf(model, name)
                setattr(parent, leaf, IrisMixtralExperts(module, *([sd[n] for n in w[p]] for p in ("w1", "w2", "w3")), config=config))
                used.update(n for ns in w.values() for n in ns)
                replaced += 1
    return replaced


def _mixtral_expert_names(name: str, module, plan: _Plan):
    """The archive names of a MixtralExperts' per-expert w1, w2, w3: from the conversion rules
    that fuse them into gate_up_proj and down_proj, else (no rules) as Mixtral checkpoints
    name them beside the module's layer."""
    gu, dn = f"{name}.gate_up_proj", f"{name}.down_proj"
    if gu in plan.groups and dn in plan.groups:
        gate_up, down = plan.group_names(gu), plan.group_names(dn)
        if len(gate_up) == 2 and len(down) == 1:
            return {"w1": gate_up[0], "w3": gate_up[1], "w2": down[0]}
        return None
    if ".layers." not in name:
        return None
    layer = name.split(".layers.")[1].split(".")[0]
    prefix = f"{name.split('.layers.')[0]}.layers.{layer}.block_sparse_moe.experts"
    names = {p: [f"{prefix}.{e}.{p}.weight" for e in range(module.num_experts)] for p in ("w1", "w2", "w3")}
    return names if all(plan.direct.get(n) == n for ns in names.values() for n in ns) else None


def _patch_linears(model: torch.nn.Module, sd: dict, plan: _Plan, used: set, installed: set) -> list:
    """Every nn.Linear whose weight is quantized in the archive becomes an IrisLinear; returns
    the biases such a Linear had that the archive lacks (reported as unset)."""
    missing_biases = []
    for name, module in list(model.named_modules()):
        if not isinstance(module, torch.nn.Linear):
            continue
        wname = plan.direct.get(f"{name}.weight")
        w = sd.get(wname) if wname else None
        if isinstance(w, QuantTensor):
            bname = plan.direct.get(f"{name}.bias")
            bias = sd.get(bname) if bname else None
            if module.bias is not None and not isinstance(bias, torch.Tensor):
                missing_biases.append(f"{name}.bias")
            iris_linear = IrisLinear(w, bias.to(_bias_dtype(module)) if isinstance(bias, torch.Tensor) else None)
            parent, leaf = _module_and_leaf(model, name)
            setattr(parent, leaf, iris_linear)
            used.update(n for n in (wname, bname if bias is not None else None) if n)
            if iris_linear.bias is not None:
                installed.add(id(iris_linear.bias))
    return missing_biases


def _bias_dtype(linear: torch.nn.Linear):
    return linear.bias.dtype if linear.bias is not None else torch.bfloat16


def _persistent_names(model: torch.nn.Module) -> list:
    """(name, module, leaf, tensor) of every parameter and persistent buffer, tied aliases
    included (a tied lm_head.weight is listed under both names)."""
    out = []
    for mname, module in model.named_modules(remove_duplicate=False):
        prefix = f"{mname}." if mname else ""
        for leaf, p in module._parameters.items():
            if p is not None:
                out.append((prefix + leaf, module, leaf, p))
        for leaf, b in module._buffers.items():
            if b is not None and leaf not in module._non_persistent_buffers_set:
                out.append((prefix + leaf, module, leaf, b))
    return out


def _set_tensors(model: torch.nn.Module, sd: dict, plan: _Plan, used: set, installed: set) -> None:
    """Sets every parameter and persistent buffer the archive holds (a new Parameter on the
    archive's device, so a meta-built model works; cast to the model's dtype where they
    differ). Tied parameters stay tied: every name of one tensor gets the same new one."""
    new_for = {}  # id(old tensor) -> the tensor that replaces it
    entries = _persistent_names(model)
    with torch.no_grad():
        for name, module, leaf, old in entries:
            if id(old) in new_for:
                continue
            value = _value_for(name, old, sd, plan, used)
            if value is None:
                continue
            if tuple(value.shape) != tuple(old.shape):
                raise IrisError(f"tensor '{name}': the archive has {list(value.shape)}, the model {list(old.shape)}")
            value = value if value.dtype == old.dtype else value.to(old.dtype)
            new = torch.nn.Parameter(value, requires_grad=False) if isinstance(old, torch.nn.Parameter) else value
            new_for[id(old)] = new
            installed.add(id(new))
        for name, module, leaf, old in entries:
            if id(old) in new_for:
                (module._parameters if leaf in module._parameters else module._buffers)[leaf] = new_for[id(old)]


def _value_for(name: str, old: torch.Tensor, sd: dict, plan: _Plan, used: set):
    """The archive's value for model tensor `name` (a QuantTensor that no iris module took is
    dequantized to the model's dtype; converter groups are merged), or None."""
    if name in plan.groups:
        names = plan.group_names(name)
        used.update(n for ns in names for n in ns)
        return _merge(name, plan.groups[name][0], [[sd[n] for n in ns] for ns in names], old.dtype)
    source = plan.direct.get(name)
    if source is None or source not in sd:
        return None
    used.add(source)
    v = sd[source]
    return v.dequantize(old.dtype if old.dtype in _C_DTYPE else torch.bfloat16) if isinstance(v, QuantTensor) else v


def _materialize_non_persistent_buffers(model: torch.nn.Module, device: torch.device) -> list:
    """Recomputes non-persistent buffers left on the meta device (rotary inv_freq: checkpoints
    do not hold them) by building the module's class again from its config on the device, as
    transformers' rotary modules are built; returns the names it could not recompute."""
    failed = []
    for mname, module in list(model.named_modules()):
        meta = [leaf for leaf in module._non_persistent_buffers_set
                if module._buffers.get(leaf) is not None and module._buffers[leaf].is_meta]
        if not meta:
            continue
        fresh = None
        config = getattr(module, "config", None)
        if config is not None:
            try:
                # The default device places the buffers (the `device=` argument is deprecated
                # in transformers 5.17 and gone in 5.18).
                with torch.device(device):
                    fresh = type(module)(config=config)
            except Exception:  # noqa: BLE001 - any failure is reported by name below
                fresh = None
        for leaf in meta:
            value = getattr(fresh, leaf, None) if fresh is not None else None
            if isinstance(value, torch.Tensor) and not value.is_meta:
                module._buffers[leaf] = value.to(device)
            else:
                failed.append(f"{mname}.{leaf}" if mname else leaf)
        for attr, value in (vars(fresh).items() if fresh is not None else ()):
            old = module.__dict__.get(attr)
            if isinstance(old, torch.Tensor) and old.is_meta and isinstance(value, torch.Tensor):
                module.__dict__[attr] = value.to(device)  # e.g. original_inv_freq, a plain attribute
    return failed


def patch(model: torch.nn.Module, path, device="cuda", strict: bool = True) -> PatchResult:
    """Loads an archive into a (transformers) model, one built on the meta device included.

    Archive names are mapped to the model's with the model's own checkpoint conversion rules
    (transformers 5.x renames some and fuses per-expert weights at load time, e.g. Mixtral's
    block_sparse_moe.experts.N.w1/w3 into mlp.experts.gate_up_proj; older transformers: names
    as they are). Then: every nn.Linear whose weight is quantized in the archive becomes an
    IrisLinear; MoE expert modules (gpt-oss, Mixtral) whose weights are quantized become
    Iris*Experts modules that run only the experts the router picks; every other parameter and
    persistent buffer is set from the archive (cast to the model's dtype; a quantized one no
    iris module runs is dequantized; fused ones are stacked and concatenated as transformers
    does). Non-persistent buffers left on the meta device (rotary inv_freq) are recomputed.

    strict=True raises IrisError naming every parameter or persistent buffer the archive left
    unset and every archive tensor the model did not take; strict=False returns them instead.
    Returns a PatchResult: the state dict iris.torch.load produced (it owns the device memory:
    keep it while the model runs), with .unset and .unused, the two lists."""
    sd = load(path, device)
    device = next((v.device for v in sd.values()), torch.device(device))
    model_names = {name for name, *_ in _persistent_names(model)}
    plan = _Plan(sd.keys(), model_names, _conversion_rules(model))
    used, installed = set(), set()
    _patch_experts(model, sd, plan, used)
    missing_biases = _patch_linears(model, sd, plan, used, installed)
    _set_tensors(model, sd, plan, used, installed)
    not_recomputed = _materialize_non_persistent_buffers(model, device)
    unset = sorted({name for name, _, _, t in _persistent_names(model) if id(t) not in installed} | set(missing_biases))
    unused = sorted(set(sd) - used)
    if strict and (unset or unused or not_recomputed):
        raise IrisError(_incomplete_message(path, unset, unused, not_recomputed))
    if not_recomputed:
        unset = sorted(set(unset) | set(not_recomputed))
    return PatchResult(sd, unset, unused)


def _incomplete_message(path, unset: list, unused: list, not_recomputed: list) -> str:
    parts = []
    if unset:
        parts.append(f"{len(unset)} model parameters or buffers the archive does not set: {', '.join(unset)}")
    if unused:
        parts.append(f"{len(unused)} archive tensors the model does not take: {', '.join(unused)}")
    if not_recomputed:
        parts.append(f"{len(not_recomputed)} non-persistent buffers left on the meta device that iris cannot recompute: "
                     f"{', '.join(not_recomputed)}")
    return f"{getattr(path, 'path', path)}: iris.torch.patch is incomplete: " + "; ".join(parts)
