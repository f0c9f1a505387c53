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

import numpy as np
import torch

from . import _format, _native
from ._archive import Archive
from ._archive import open as _open
from ._errors import IrisError
from ._ops import _C_DTYPE  # registers torch.ops.iris.* (the kernels as custom ops)

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
                ("verify", ctypes.c_uint32), ("nf4_table", ctypes.c_uint32), ("reserved32", ctypes.c_uint32),
                ("reserved", ctypes.c_uint64 * 3)]

# iris_upload_options.nf4_table (IRIS_NF4_TABLE_*): the arithmetic of the NF4 GEMVs' weights.
_NF4_TABLES = {"exact": 0, "bf16": 1}


def _nf4_table_code(nf4_table: str) -> int:
    if nf4_table not in _NF4_TABLES:
        raise IrisError(f"nf4_table must be one of {', '.join(_NF4_TABLES)}, not {nf4_table!r}")
    return _NF4_TABLES[nf4_table]


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
    lib.iris_cuda_experts_create_rows.argtypes = [ctypes.POINTER(vp), ctypes.c_uint64, ctypes.c_uint64, ctypes.POINTER(vp), msg, sz]
    lib.iris_cuda_experts_free.argtypes = [vp]
    lib.iris_cuda_experts_free.restype = None
    for f in ("count", "n", "k"):
        getattr(lib, f"iris_cuda_experts_{f}").argtypes = [vp]
        getattr(lib, f"iris_cuda_experts_{f}").restype = ctypes.c_uint64
    lib.iris_cuda_experts_use_tensor_cores.argtypes = [vp]
    lib.iris_cuda_gemv_experts.argtypes = [vp, vp, vp, ctypes.c_uint64, vp, ctypes.c_uint64, vp, ctypes.c_int, vp, msg, sz]
    lib.iris_cuda_gemv_experts_swiglu.argtypes = [vp, vp, vp, ctypes.c_uint64, vp, ctypes.c_uint64, vp, ctypes.c_float, ctypes.c_float, vp,
                                                  vp, msg, sz]
    lib.iris_cuda_moe_route.argtypes = [vp, ctypes.c_uint64, vp, vp, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint64, vp, vp, vp, vp, vp,
                                        msg, sz]
    lib.iris_cuda_attention_decode.argtypes = [vp, vp, vp, vp, vp] + [ctypes.c_uint64] * 5 + [ctypes.c_float, vp, vp, msg, sz]
    lib.iris_cuda_gemv_bf16.argtypes = [vp, ctypes.c_uint64, ctypes.c_uint64, vp, vp, ctypes.c_int, vp, vp, msg, sz]
    lib.iris_cuda_gemv_bf16_f32.argtypes = [vp, ctypes.c_uint64, ctypes.c_uint64, vp, vp, ctypes.c_int, vp, vp, msg, sz]
    lib.iris_cuda_attention_decode_rope.argtypes = [vp] * 9 + [ctypes.c_uint64] * 5 + [ctypes.c_float, vp, vp, msg, sz]
    lib.iris_cuda_residual_norm.argtypes = ([vp, vp] + [ctypes.c_uint64] * 3 + [vp, ctypes.c_uint64, vp, vp, vp, ctypes.c_float, ctypes.c_int,
                                            vp, vp, vp, msg, sz])
    lib.iris_cuda_gemv_experts_gated.argtypes = [vp, vp, vp, ctypes.c_uint64, vp, ctypes.c_uint64, vp, vp, vp, msg, sz]
    lib.iris_cuda_experts_gated_exchange.argtypes = [vp, ctypes.c_uint64]
    lib.iris_cuda_experts_gated_exchange.restype = ctypes.c_uint64
    lib.iris_cuda_experts_gated_in_launch.argtypes = [vp]
    lib.iris_cuda_experts_dequantize.argtypes = [vp, vp, ctypes.c_uint64, vp, ctypes.c_size_t, ctypes.c_int, vp, ctypes.c_size_t, vp, msg, sz]
    lib.iris_cuda_experts_dequantize_workspace.argtypes = [vp, ctypes.c_uint64]
    lib.iris_cuda_experts_dequantize_workspace.restype = ctypes.c_uint64
    lib.iris_cuda_gated_silu.argtypes = [vp, vp] + [ctypes.c_uint64] * 4 + [vp, vp, msg, sz]
    lib._iris_torch_declared = True
    return lib


def _check(code: int, buf) -> None:
    if code != 0:
        _native._raise(code, buf)


def _rows_out(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """The GEMV ops' [R, N] BF16 result as x's leading shape and dtype."""
    y = y.reshape(*x.shape[:-1], y.shape[-1])
    return y if x.dtype == torch.bfloat16 else y.to(x.dtype)


class DeviceArchive:
    """libiris's device copy of an archive (iris_cuda_archive); freed when the last tensor
    that views it is gone."""

    def __init__(self, archive: Archive, device: torch.device, names=None, nf4_table: int = 0):
        """nf4_table: an iris_upload_options.nf4_table value (_nf4_table_code)."""
        lib = _lib()
        if not lib.iris_has_cuda():
            raise IrisError("this libiris was built without CUDA")
        opts = _UploadOptions()
        lib.iris_upload_options_init(ctypes.byref(opts))
        opts.device = device.index if device.index is not None else torch.cuda.current_device()
        opts.nf4_table = nf4_table
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
        # The handle as a plain int: what the custom ops (iris/_ops.py) take, and what
        # torch.compile treats as a constant of the traced graph.
        self._handle = int(tensor.value)
        self.shape, self.dtype, self.format, self.tiled = torch.Size(shape), dtype, fmt, tiled
        self.device = owner.device

    @property
    def T(self) -> "_Transposed":  # noqa: N802 - mirrors torch.Tensor.T
        return _Transposed(self)

    def dim(self) -> int:
        return len(self.shape)

    def component_address(self, role: str) -> int | None:
        """The device address of a component (FORMAT.md section 4), for kernels of your own.

        Each holds the archive's bytes except the codes of an MXFP4 tensor that the tensor-core
        GEMV runs, whose 32-bit words are in its bit-plane order (docs/API.md, "MXFP4 codes on
        the device")."""
        ptr = self._owner._lib.iris_cuda_tensor_component(self._t, _ROLES[role])
        return int(ptr) if ptr else None

    def dequantize(self, dtype: torch.dtype | None = None) -> torch.Tensor:
        """One kernel launch on the current stream; bit for bit the CPU reference."""
        dtype = dtype or self.dtype
        if dtype not in _C_DTYPE:
            raise IrisError(f"tensor '{self.name}': dequantize to float32, float16 or bfloat16, not {dtype}")
        return torch.ops.iris.dequantize(self._handle, list(self.shape), dtype, self.device)

    def linear(self, x: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
        """x @ W.T (+ bias) for W = this [N, K] weight: the fused GEMV for up to 16 rows of x,
        dequantize + cuBLAS above."""
        if len(self.shape) != 2:
            raise IrisError(f"tensor '{self.name}': linear needs a [N, K] weight, this one is {list(self.shape)}")
        n, k = self.shape
        if x.shape[-1] != k:
            raise IrisError(f"tensor '{self.name}': x has {x.shape[-1]} features, the weight {k}")
        if 1 <= math.prod(x.shape[:-1]) <= 16 and self.tiled and x.is_cuda:
            y = _rows_out(x, torch.ops.iris.gemv(x.reshape(-1, k), self._handle, n))
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
        return _rows_out(x, torch.ops.iris.gemv_matrix(x.reshape(-1, k), self.stack._handle, self.m, n))


class Experts:
    """The experts of one MoE projection, for the grouped expert GEMV (iris_cuda_gemv_experts):
    the E matrices of a quantized [E, N, K] stack (gpt-oss), or a list of quantized [N, K]
    tensors of one format and geometry (Mixtral's per-expert weights). gemv() multiplies each
    (token, expert) pair the router chose in one launch that reads only those experts' tiles;
    the indices stay on the GPU, so nothing synchronizes.

    rows=R: the experts are the tensors' row blocks of R rows, in order (iris_cuda_experts_create_
    rows): Experts([q, k, v], rows=k.shape[0]) runs a layer's three projections as one launch."""

    def __init__(self, tensors, rows: int | None = None):
        tensors = [tensors] if isinstance(tensors, QuantTensor) else list(tensors)
        if not tensors or not all(isinstance(t, QuantTensor) for t in tensors):
            raise IrisError("Experts takes a QuantTensor stack or a list of QuantTensors")
        owner = tensors[0]._owner
        self._lib, self._tensors, self.name = owner._lib, tensors, tensors[0].name
        self.device = tensors[0].device
        handles = (ctypes.c_void_p * len(tensors))(*[t._t.value for t in tensors])
        out, msg = ctypes.c_void_p(), ctypes.create_string_buffer(1024)
        if rows is None:
            _check(self._lib.iris_cuda_experts_create(handles, len(tensors), ctypes.byref(out), msg, len(msg)), msg)
        else:
            _check(self._lib.iris_cuda_experts_create_rows(handles, len(tensors), int(rows), ctypes.byref(out), msg, len(msg)), msg)
        self._h = out
        self._handle = int(out.value)  # for torch.ops.iris.gemv_experts
        self.count = int(self._lib.iris_cuda_experts_count(out))
        self.n, self.k = int(self._lib.iris_cuda_experts_n(out)), int(self._lib.iris_cuda_experts_k(out))
        # True: gemv runs on the tensor cores (BF16 operands), else FP32 CUDA cores (error bounds).
        self.tensor_cores = bool(self._lib.iris_cuda_experts_use_tensor_cores(out))
        # True: a gated activation runs inside the grouped gate/up launch
        # (torch.ops.iris.gemv_experts_gated is one kernel); else that op is the plain launch
        # into its exchange then the activation's own, and gemv_experts then
        # torch.ops.iris.gated_silu is the same two without the exchange (the same bits).
        self.gated_in_launch = bool(self._lib.iris_cuda_experts_gated_in_launch(out))
        # True: dequantize() takes these experts (MXFP4: iris_cuda_experts_dequantize).
        self.dequantizes = bool(self._lib.iris_cuda_experts_dequantize_workspace(out, 1))

    def dequantize(self, expert_ids: torch.Tensor) -> torch.Tensor:
        """The picked experts' weights, [P, N, K] FP32: matrix p is expert expert_ids[p] (int32 on
        the device; nothing synchronizes), the values the whole stack's dequantize() gives it; an
        index out of range gives a NaN matrix. MXFP4 experts only (dequantizes says whether
        these are)."""
        ids = expert_ids.to(device=self.device, dtype=torch.int32).contiguous()
        return torch.ops.iris.experts_dequantize(ids, self._handle, self.n, self.k)

    def gemv(self, x: torch.Tensor, expert_ids: torch.Tensor, x_rows: torch.Tensor | None = None) -> torch.Tensor:
        """y[p] = W[expert_ids[p]] @ x[x_rows[p]] (x_rows None: x[p]) for every pair p; x is
        [T, K], the result [P, N] in x's dtype (BF16 operands, FP32 accumulation). A pair with
        an index out of range gets a NaN row."""
        if x.dim() != 2 or x.shape[1] != self.k:
            raise IrisError(f"tensor '{self.name}': x must be [T, {self.k}], got {list(x.shape)}")
        ids = expert_ids.reshape(-1).to(device=x.device, dtype=torch.int32).contiguous()
        rows = None if x_rows is None else x_rows.reshape(-1).to(device=x.device, dtype=torch.int32).contiguous()
        if rows is not None and rows.numel() != ids.numel():
            raise IrisError(f"tensor '{self.name}': {ids.numel()} expert ids but {rows.numel()} rows")
        y = torch.ops.iris.gemv_experts(x, ids, rows, self._handle, self.n)
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


def load(path, device="cuda", names=None, rank=None, world_size=None, nf4_table: str = "exact") -> dict:
    """Uploads the archive (or the named tensors) with libiris's pipeline; returns name ->
    torch.Tensor (unquantized: views of the device copy) or QuantTensor (quantized). With rank
    and world_size, `path` is a folder of tensor-parallel rank archives (`iris shard`) and this
    rank's is loaded (iris.open_rank checks it is that rank): its tensors are its boxes.
    nf4_table="bf16": the NF4 GEMVs form each weight as bitsandbytes' own GEMV does,
    bf16(bf16(t) * bf16(absmax)), instead of the table value as two BF16s (2^-16) and the exact
    absmax: faster, a looser bound (IRIS_NF4_TABLE_BF16 in iris_cuda.h). Dequantization is
    exact either way."""
    nf4_table_code = _nf4_table_code(nf4_table)
    device = torch.device(device)
    if device.type != "cuda":
        raise IrisError("iris.torch.load uploads to a CUDA device; use iris.open() for the CPU")
    if device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    if (rank is None) != (world_size is None):
        raise IrisError("iris.torch.load: give rank and world_size together")
    if rank is not None:
        from ._archive import open_rank

        archive = open_rank(path, rank, world_size)
    else:
        archive = path if isinstance(path, Archive) else _open(path)
    owner = DeviceArchive(archive, device, names, nf4_table_code)
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


# The patching half (iris/_patch.py) imports the classes above, so it comes last.
from ._patch import IrisGptOssExperts, IrisMixtralExperts, PatchResult, patch  # noqa: E402,F401
