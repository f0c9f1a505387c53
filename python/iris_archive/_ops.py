"""iris's CUDA kernels as PyTorch custom operators (torch.library), so that torch.compile
(fullgraph=True, mode="reduce-overhead") traces through a patched model and CUDA graphs
capture it: each op is opaque to the compiler, has a fake (meta) implementation giving the
output's shape and dtype, allocates its output through torch's allocator, runs on torch's
current stream and never synchronizes or copies between host and device.

A quantized tensor is passed as its libiris handle (an int: the iris_cuda_tensor or
iris_cuda_experts pointer), which the QuantTensor / Experts that own it keep alive.

    torch.ops.iris.gemv(x, handle, n)                  x [R, K] -> [R, N] BF16
    torch.ops.iris.gemv_f32(x, handle, n)              the same sums, not rounded: [R, N] FP32
    torch.ops.iris.gemv_matrix(x, handle, m, n)        matrix m of an [E, N, K] stack
    torch.ops.iris.gemv_experts(x, ids, rows, handle, n)
    torch.ops.iris.gemv_experts_f32(x, ids, rows, handle, n)  the same sums, not rounded: [P, N] FP32
    torch.ops.iris.gemv_experts_swiglu(x, ids, rows, handle, n, bias, alpha, limit)  gpt-oss's activation inside: [P, N / 2]
    torch.ops.iris.gemv_experts_gated(x, ids, rows, handle, n, exchange)  silu(gate) * up inside: [P / 2, N]
    torch.ops.iris.dequantize(handle, shape, dtype, device)
    torch.ops.iris.experts_dequantize(ids, handle, n, k)  the picked experts' weights: [P, N, K] FP32
    torch.ops.iris.gemv_bf16(x, w, bias)               x [R, K] times a dense BF16 w [N, K] (+ bias) -> [R, N] BF16
    torch.ops.iris.gemv_bf16_f32(x, w, bias)           the same sums, not rounded: [R, N] FP32 (logits)
    torch.ops.iris.moe_route(x, w, bias, top_k, workspace) -> (weights, ids, logits)
    torch.ops.iris.attention_decode(q, k_cache, v_cache, pos, sinks, window, scale)
    torch.ops.iris.attention_decode_rope(q, k, v, cos, sin, k_cache, v_cache, pos, sinks, window, scale)
    torch.ops.iris.residual_norm(x, y, norm_w, eps, weight_in_f32, bias, ids, weights) -> (x', h)
    torch.ops.iris.gated_silu(gate, up)                silu(gate) * up, transformers' BF16 roundings -> [R, N] BF16"""

import ctypes
import threading
from typing import Optional

import torch

_C_DTYPE = {torch.float32: 11, torch.float16: 9, torch.bfloat16: 10}  # iris_dtype values
_BF16 = _C_DTYPE[torch.bfloat16]


_local = threading.local()


def _msg():
    """A per-thread message buffer, reused: the kernel calls sit on the decode path."""
    buf = getattr(_local, "msg", None)
    if buf is None:
        buf = _local.msg = ctypes.create_string_buffer(1024)
    return buf


def _t():
    """iris.torch, which imports this module: its declared library and its error check."""
    from . import torch as iris_torch

    return iris_torch


def _bf16_rows(x: torch.Tensor) -> torch.Tensor:
    xb = x if x.dtype == torch.bfloat16 and x.is_contiguous() and x.data_ptr() % 16 == 0 else x.to(torch.bfloat16).contiguous()
    return xb if xb.data_ptr() % 16 == 0 else xb.clone()


def _rows16(x: torch.Tensor, n: int, launch, dtype=torch.bfloat16) -> torch.Tensor:
    """x [R, K] through launch(x_ptr, rows, y_ptr, stream, msg) -> status, 16 rows a launch."""
    xb, msg = _bf16_rows(x), _msg()
    y = torch.empty(xb.shape[0], n, dtype=dtype, device=x.device)
    stream, check = torch.cuda.current_stream(x.device).cuda_stream, _t()._check
    for r0 in range(0, xb.shape[0], 16):
        check(launch(xb[r0:].data_ptr(), min(16, xb.shape[0] - r0), y[r0:].data_ptr(), stream, msg), msg)
    return y


def _gemv(x: torch.Tensor, handle: int, n: int, dtype: torch.dtype) -> torch.Tensor:
    fn, code = _t()._lib().iris_cuda_gemv, _C_DTYPE[dtype]
    return _rows16(x, n, lambda xp, rows, yp, stream, msg: fn(handle, xp, rows, yp, code, stream, msg, len(msg)), dtype)


@torch.library.custom_op("iris::gemv_f32", mutates_args=())
def gemv_f32(x: torch.Tensor, handle: int, n: int) -> torch.Tensor:
    """gemv with FP32 outputs (the FP32 sums before the BF16 rounding): a model's logits."""
    return _gemv(x, handle, n, torch.float32)


@gemv_f32.register_fake
def _(x, handle, n):
    return x.new_empty((x.shape[0], n), dtype=torch.float32)


@torch.library.custom_op("iris::gemv", mutates_args=())
def gemv(x: torch.Tensor, handle: int, n: int) -> torch.Tensor:
    """x [R, K] times the [N, K] weight `handle`: the fused GEMV, 16 rows of x per launch."""
    return _gemv(x, handle, n, torch.bfloat16)


@gemv.register_fake
def _(x, handle, n):
    return x.new_empty((x.shape[0], n), dtype=torch.bfloat16)


@torch.library.custom_op("iris::gemv_matrix", mutates_args=())
def gemv_matrix(x: torch.Tensor, handle: int, m: int, n: int) -> torch.Tensor:
    """x [R, K] times matrix m of the [E, N, K] stack `handle`."""
    fn = _t()._lib().iris_cuda_gemv_matrix
    return _rows16(x, n, lambda xp, rows, yp, stream, msg: fn(handle, m, xp, rows, yp, _BF16, stream, msg, len(msg)))


@gemv_matrix.register_fake
def _(x, handle, m, n):
    return x.new_empty((x.shape[0], n), dtype=torch.bfloat16)


def _experts_launch(x: torch.Tensor, ids: torch.Tensor, rows: Optional[torch.Tensor], width: int, launch,
                    out_rows: Optional[int] = None, dtype=torch.bfloat16) -> torch.Tensor:
    """A grouped expert GEMV's launch: launch(ids_ptr, rows_ptr, pairs, x_ptr, x_rows, y_ptr,
    stream, msg) -> status, into y, `dtype` [out_rows (default: pairs), width]."""
    xb, msg = _bf16_rows(x), _msg()
    y = torch.empty(ids.numel() if out_rows is None else out_rows, width, dtype=dtype, device=x.device)
    stream = torch.cuda.current_stream(x.device).cuda_stream
    _t()._check(launch(ids.data_ptr(), rows.data_ptr() if rows is not None else None, ids.numel(), xb.data_ptr(), xb.shape[0],
                       y.data_ptr(), stream, msg), msg)
    return y


@torch.library.custom_op("iris::gemv_experts", mutates_args=())
def gemv_experts(x: torch.Tensor, ids: torch.Tensor, rows: Optional[torch.Tensor], handle: int, n: int) -> torch.Tensor:
    """y[p] = W[ids[p]] @ x[rows[p]] (rows None: x[p]) for the experts `handle`; ids and rows int32."""
    fn = _t()._lib().iris_cuda_gemv_experts
    return _experts_launch(x, ids, rows, n, lambda ip, rp, pairs, xp, xr, yp, stream, msg:
                           fn(handle, ip, rp, pairs, xp, xr, yp, _BF16, stream, msg, len(msg)))


@gemv_experts.register_fake
def _(x, ids, rows, handle, n):
    return x.new_empty((ids.numel(), n), dtype=torch.bfloat16)


@torch.library.custom_op("iris::gemv_experts_f32", mutates_args=())
def gemv_experts_f32(x: torch.Tensor, ids: torch.Tensor, rows: Optional[torch.Tensor], handle: int, n: int) -> torch.Tensor:
    """gemv_experts with FP32 outputs (the sums before the BF16 rounding): a tensor-parallel
    rank's partial sums over its columns, summed across the ranks before they are rounded."""
    fn = _t()._lib().iris_cuda_gemv_experts
    return _experts_launch(x, ids, rows, n, lambda ip, rp, pairs, xp, xr, yp, stream, msg:
                           fn(handle, ip, rp, pairs, xp, xr, yp, _C_DTYPE[torch.float32], stream, msg, len(msg)),
                           dtype=torch.float32)


@gemv_experts_f32.register_fake
def _(x, ids, rows, handle, n):
    return x.new_empty((ids.numel(), n), dtype=torch.float32)


@torch.library.custom_op("iris::experts_dequantize", mutates_args=())
def experts_dequantize(ids: torch.Tensor, handle: int, n: int, k: int) -> torch.Tensor:
    """The experts ids (int32 [P] on the device) of the set `handle` dequantized, [P, n, k] FP32
    (iris_cuda_experts_dequantize: MXFP4 experts; a bad id gives a NaN matrix)."""
    if ids.dtype != torch.int32 or not ids.is_contiguous() or not ids.is_cuda:
        from ._errors import IrisError

        raise IrisError(f"iris: experts_dequantize ids must be int32, contiguous and on the experts' GPU, got {ids.dtype} on {ids.device}")
    lib, msg, pairs = _t()._lib(), _msg(), ids.numel()
    out = torch.empty(pairs, n, k, dtype=torch.float32, device=ids.device)
    ws_bytes = int(lib.iris_cuda_experts_dequantize_workspace(handle, pairs))
    ws = torch.empty(max(ws_bytes, 16), dtype=torch.uint8, device=ids.device)  # the caching allocator aligns it
    stream = torch.cuda.current_stream(ids.device).cuda_stream
    _t()._check(lib.iris_cuda_experts_dequantize(handle, ids.data_ptr(), pairs, ws.data_ptr(), ws.numel(), _C_DTYPE[torch.float32],
                                                 out.data_ptr(), out.numel() * 4, stream, msg, len(msg)), msg)
    return out


@experts_dequantize.register_fake
def _(ids, handle, n, k):
    return ids.new_empty((ids.numel(), n, k), dtype=torch.float32)


@torch.library.custom_op("iris::gemv_experts_swiglu", mutates_args=())
def gemv_experts_swiglu(x: torch.Tensor, ids: torch.Tensor, rows: Optional[torch.Tensor], handle: int, n: int,
                        bias: Optional[torch.Tensor], alpha: float, limit: float) -> torch.Tensor:
    """gemv_experts with gpt-oss's expert activation in the same launch
    (iris_cuda_gemv_experts_swiglu): [P, N / 2] BF16, output j of pair p the clamped SwiGLU of
    its outputs 2j (gate) and 2j + 1 (up), each plus bias[ids[p]] (BF16 [E, N]) when given."""
    lib = _t()._lib()
    if bias is not None:
        _bf16_dense(bias, "the gate_up bias")
        experts = lib.iris_cuda_experts_count(handle)
        if bias.numel() != experts * n:
            from ._errors import IrisError

            raise IrisError(f"iris: gemv_experts_swiglu bias {tuple(bias.shape)} is not [{experts}, {n}] (one row per expert)")
    bp = bias.data_ptr() if bias is not None else None
    return _experts_launch(x, ids, rows, n // 2, lambda ip, rp, pairs, xp, xr, yp, stream, msg:
                           lib.iris_cuda_gemv_experts_swiglu(handle, ip, rp, pairs, xp, xr, bp, ctypes.c_float(alpha),
                                                             ctypes.c_float(limit), yp, stream, msg, len(msg)))


@gemv_experts_swiglu.register_fake
def _(x, ids, rows, handle, n, bias, alpha, limit):
    return x.new_empty((ids.numel(), n // 2), dtype=torch.bfloat16)


@torch.library.custom_op("iris::gemv_experts_gated", mutates_args=("exchange",))
def gemv_experts_gated(x: torch.Tensor, ids: torch.Tensor, rows: Optional[torch.Tensor], handle: int, n: int,
                       exchange: torch.Tensor) -> torch.Tensor:
    """gemv_experts with a gated MLP's activation in the same launch
    (iris_cuda_gemv_experts_gated): pairs 2j (gate) and 2j + 1 (up) give row j of the [P / 2, N]
    BF16 output, silu(gate) * up with transformers' BF16 roundings (gated_silu's arithmetic).
    exchange: int32 zeros, at least (P / 2) * N of them, on x's device; every call leaves them
    zero (a CUDA graph replays it), calls that may run at once need their own."""
    from ._errors import IrisError

    lib = _t()._lib()
    pairs = ids.numel()
    if pairs % 2:
        raise IrisError(f"iris: gemv_experts_gated takes pairs two by two (gate, up), got {pairs}")
    need = lib.iris_cuda_experts_gated_exchange(handle, pairs)
    if exchange.dtype != torch.int32 or not exchange.is_contiguous() or exchange.numel() < need or exchange.device != x.device:
        raise IrisError(f"iris: gemv_experts_gated needs an exchange of {need} int32 zeros on {x.device} "
                        f"(got {exchange.numel()} {exchange.dtype} on {exchange.device})")
    ep = exchange.data_ptr()
    return _experts_launch(x, ids, rows, n, lambda ip, rp, pairs_, xp, xr, yp, stream, msg:
                           lib.iris_cuda_gemv_experts_gated(handle, ip, rp, pairs_, xp, xr, ep, yp, stream, msg, len(msg)),
                           out_rows=pairs // 2)


@gemv_experts_gated.register_fake
def _(x, ids, rows, handle, n, exchange):
    return x.new_empty((ids.numel() // 2, n), dtype=torch.bfloat16)


@torch.library.custom_op("iris::dequantize", mutates_args=())
def dequantize(handle: int, shape: list[int], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """The whole tensor `handle` in `dtype` (float32, float16 or bfloat16): one launch."""
    t = _t()
    out = torch.empty(shape, dtype=dtype, device=device)
    msg = _msg()
    stream = torch.cuda.current_stream(device).cuda_stream
    t._check(t._lib().iris_cuda_dequantize(handle, _C_DTYPE[dtype], out.data_ptr(), out.numel() * out.element_size(), stream, msg,
                                       len(msg)), msg)
    return out


@dequantize.register_fake
def _(handle, shape, dtype, device):
    return torch.empty(shape, dtype=dtype, device=device)


def _bf16_dense(t: torch.Tensor, what: str) -> torch.Tensor:
    if t.dtype != torch.bfloat16 or not t.is_contiguous() or not t.is_cuda:
        from ._errors import IrisError

        raise IrisError(f"iris: {what} must be a contiguous BF16 CUDA tensor (got {t.dtype}, {tuple(t.shape)})")
    return t


def _dense_operands(x: torch.Tensor, w: torch.Tensor, bias: Optional[torch.Tensor]) -> None:
    """The dense GEMVs' operand checks: x [R, K] on w's device, bias [N] (the kernel reads K
    columns of x and N biases whatever the tensors hold)."""
    _bf16_dense(w, "the weight")
    if bias is not None:
        _bf16_dense(bias, "the bias")
    if w.dim() != 2 or x.dim() != 2 or x.shape[1] != w.shape[1] or x.device != w.device or (
            bias is not None and (bias.numel() != w.shape[0] or bias.device != w.device)):
        from ._errors import IrisError

        raise IrisError(f"iris: x {tuple(x.shape)} ({x.device}) does not fit the weight {tuple(w.shape)} ({w.device})"
                        + (f" and bias {tuple(bias.shape)}" if bias is not None else ""))


@torch.library.custom_op("iris::gemv_bf16", mutates_args=())
def gemv_bf16(x: torch.Tensor, w: torch.Tensor, bias: Optional[torch.Tensor]) -> torch.Tensor:
    """x [R, K] times a dense BF16 weight w [N, K], plus bias [N]: iris_cuda_gemv_bf16, the bias
    in the same launch (cuBLAS adds it with a reduction kernel or a separate add)."""
    _dense_operands(x, w, bias)
    fn, n, k = _t()._lib().iris_cuda_gemv_bf16, w.shape[0], w.shape[1]
    b = bias.data_ptr() if bias is not None else None
    return _rows16(x, n, lambda xp, rows, yp, stream, msg: fn(w.data_ptr(), n, k, b, xp, rows, yp, stream, msg, len(msg)))


@gemv_bf16.register_fake
def _(x, w, bias):
    return x.new_empty((x.shape[0], w.shape[0]), dtype=torch.bfloat16)


@torch.library.custom_op("iris::gemv_bf16_f32", mutates_args=())
def gemv_bf16_f32(x: torch.Tensor, w: torch.Tensor, bias: Optional[torch.Tensor]) -> torch.Tensor:
    """gemv_bf16 with FP32 outputs (its sums before the BF16 rounding): a model's logits from a
    dense BF16 lm_head (iris_cuda_gemv_bf16_f32)."""
    _dense_operands(x, w, bias)
    fn, n, k = _t()._lib().iris_cuda_gemv_bf16_f32, w.shape[0], w.shape[1]
    b = bias.data_ptr() if bias is not None else None
    return _rows16(x, n, lambda xp, rows, yp, stream, msg: fn(w.data_ptr(), n, k, b, xp, rows, yp, stream, msg, len(msg)), torch.float32)


@gemv_bf16_f32.register_fake
def _(x, w, bias):
    return x.new_empty((x.shape[0], w.shape[0]), dtype=torch.float32)


@torch.library.custom_op("iris::moe_route", mutates_args=())
def moe_route(x: torch.Tensor, w: torch.Tensor, bias: Optional[torch.Tensor], top_k: int,
              workspace: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """An MoE router in one launch (iris_cuda_moe_route): for x [R, K] and the router's w
    [E, K] (+ bias [E]), the BF16 logits [R, E], the top_k experts of each row (int32, largest
    first) and the softmax over their logits (BF16 [R, top_k]). `workspace`: int32 [R] zeros,
    kept by the caller; every call leaves it zero (so it is not a mutated input)."""
    t = _t()
    xb, msg = _bf16_rows(x), _msg()
    rows, experts = xb.shape[0], w.shape[0]
    _bf16_dense(w, "the router weight")
    if bias is not None:
        _bf16_dense(bias, "the router bias")
    logits = torch.empty(rows, experts, dtype=torch.bfloat16, device=x.device)
    weights = torch.empty(rows, top_k, dtype=torch.bfloat16, device=x.device)
    ids = torch.empty(rows, top_k, dtype=torch.int32, device=x.device)
    stream = torch.cuda.current_stream(x.device).cuda_stream
    t._check(t._lib().iris_cuda_moe_route(xb.data_ptr(), rows, w.data_ptr(), bias.data_ptr() if bias is not None else None, experts,
                                          xb.shape[1], top_k, logits.data_ptr(), weights.data_ptr(), ids.data_ptr(),
                                          workspace.data_ptr(), stream, msg, len(msg)), msg)
    return weights, ids, logits


@moe_route.register_fake
def _(x, w, bias, top_k, workspace):
    rows, experts = x.shape[0], w.shape[0]
    return (x.new_empty((rows, top_k), dtype=torch.bfloat16), x.new_empty((rows, top_k), dtype=torch.int32),
            x.new_empty((rows, experts), dtype=torch.bfloat16))


@torch.library.custom_op("iris::attention_decode", mutates_args=())
def attention_decode(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, pos: torch.Tensor, sinks: Optional[torch.Tensor],
                     window: int, scale: float) -> torch.Tensor:
    """Attention of one query q [heads, head_dim] over a static cache k_cache, v_cache
    [kv_heads, max_len, head_dim] (BF16) at position pos (an int64 device tensor of one
    element, read by the kernel: one CUDA graph serves every position), positions
    pos - window < p <= pos (window 0: all p <= pos), with per-head sinks [heads] or None
    (iris_cuda_attention_decode). Returns [1, heads * head_dim] BF16."""
    t = _t()
    heads, head_dim = q.shape
    kv_heads, max_len = k_cache.shape[0], k_cache.shape[1]
    qb = _bf16_dense(q.contiguous(), "q")
    _bf16_dense(k_cache, "the key cache")
    _bf16_dense(v_cache, "the value cache")
    if pos.dtype != torch.int64 or pos.numel() != 1:
        from ._errors import IrisError

        raise IrisError("iris: pos must be one int64 on the device")
    if sinks is not None:
        _bf16_dense(sinks, "the sinks")
    out = torch.empty(1, heads * head_dim, dtype=torch.bfloat16, device=q.device)
    msg = _msg()
    stream = torch.cuda.current_stream(q.device).cuda_stream
    t._check(t._lib().iris_cuda_attention_decode(qb.data_ptr(), k_cache.data_ptr(), v_cache.data_ptr(), pos.data_ptr(),
                                                 sinks.data_ptr() if sinks is not None else None, heads, kv_heads, head_dim, max_len,
                                                 window, scale, out.data_ptr(), stream, msg, len(msg)), msg)
    return out


@attention_decode.register_fake
def _(q, k_cache, v_cache, pos, sinks, window, scale):
    return q.new_empty((1, q.shape[0] * q.shape[1]), dtype=torch.bfloat16)


@torch.library.custom_op("iris::attention_decode_rope", mutates_args=("k_cache", "v_cache"))
def attention_decode_rope(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                          k_cache: torch.Tensor, v_cache: torch.Tensor, pos: torch.Tensor, sinks: Optional[torch.Tensor], window: int,
                          scale: float) -> torch.Tensor:
    """attention_decode with the step's rotary positions and cache write in the same launch
    (iris_cuda_attention_decode_rope): q [heads, head_dim] and this position's k, v
    [kv_heads, head_dim] as the projections give them; q and k are rotated by row `pos` of
    cos, sin [max_len, head_dim] (rotate_half form), k and v written into k_cache, v_cache at
    pos (mutated), then the attention as attention_decode's. Returns [1, heads * head_dim] BF16."""
    from ._errors import IrisError

    t = _t()
    heads, head_dim = q.shape
    kv_heads, max_len = k_cache.shape[0], k_cache.shape[1]
    qb, kb, vb = (_bf16_dense(x.contiguous(), what) for x, what in ((q, "q"), (k, "k"), (v, "v")))
    if kb.numel() != kv_heads * head_dim or vb.numel() != kv_heads * head_dim:
        raise IrisError(f"iris: attention_decode_rope k {tuple(k.shape)} / v {tuple(v.shape)} for {kv_heads} kv heads of {head_dim}")
    for x, what in ((cos, "the cos table"), (sin, "the sin table"), (k_cache, "the key cache"), (v_cache, "the value cache")):
        _bf16_dense(x, what)
    if cos.shape != (max_len, head_dim) or sin.shape != (max_len, head_dim):
        raise IrisError(f"iris: attention_decode_rope tables {tuple(cos.shape)} / {tuple(sin.shape)} for [{max_len}, {head_dim}]")
    if pos.dtype != torch.int64 or pos.numel() != 1:
        raise IrisError("iris: pos must be one int64 on the device")
    if sinks is not None:
        _bf16_dense(sinks, "the sinks")
    out = torch.empty(1, heads * head_dim, dtype=torch.bfloat16, device=q.device)
    msg = _msg()
    stream = torch.cuda.current_stream(q.device).cuda_stream
    t._check(t._lib().iris_cuda_attention_decode_rope(qb.data_ptr(), kb.data_ptr(), vb.data_ptr(), cos.data_ptr(), sin.data_ptr(),
                                                      k_cache.data_ptr(), v_cache.data_ptr(), pos.data_ptr(),
                                                      sinks.data_ptr() if sinks is not None else None, heads, kv_heads, head_dim,
                                                      max_len, window, scale, out.data_ptr(), stream, msg, len(msg)), msg)
    return out


@attention_decode_rope.register_fake
def _(q, k, v, cos, sin, k_cache, v_cache, pos, sinks, window, scale):
    return q.new_empty((1, q.shape[0] * q.shape[1]), dtype=torch.bfloat16)


@torch.library.custom_op("iris::residual_norm", mutates_args=())
def residual_norm(x: torch.Tensor, y: torch.Tensor, norm_w: torch.Tensor, eps: float, weight_in_f32: bool,
                  bias: Optional[torch.Tensor] = None, ids: Optional[torch.Tensor] = None,
                  weights: Optional[torch.Tensor] = None) -> tuple[torch.Tensor, torch.Tensor]:
    """The residual step and the next RMSNorm in one launch (iris_cuda_residual_norm): for x
    [R, N] and y [R * T, N] (a projection's output, T = 1, or a row's T expert outputs in pick
    order), x' = x + sum_t weights[:, t] * (y_t + bias[ids[:, t]]) and h = rms_norm(x') * norm_w,
    both BF16 [R, N]. bias [E, N] with ids int32 [R, T], and weights BF16 [R, T], are optional;
    weight_in_f32: the norm weight multiplies the FP32 normalized value (gpt-oss) rather than
    its BF16 rounding (Llama)."""
    from ._errors import IrisError

    t = _t()
    xb = _bf16_dense(x.contiguous(), "the residual")
    n = xb.shape[-1]
    rows = xb.numel() // n if n else 0
    yb = _bf16_dense(y.contiguous(), "the terms")
    if rows == 0 or yb.numel() % (rows * n) != 0 or yb.shape[-1] != n:
        raise IrisError(f"iris: residual_norm terms {tuple(y.shape)} do not fit the residual {tuple(x.shape)}")
    terms = yb.numel() // (rows * n)
    _bf16_dense(norm_w, "the norm weight")
    if norm_w.numel() != n:
        raise IrisError(f"iris: residual_norm norm weight of {norm_w.numel()} elements for rows of {n}")
    bias_rows = 0
    if bias is not None:
        _bf16_dense(bias, "the bias")
        if ids is None or ids.dtype != torch.int32 or not ids.is_contiguous() or ids.numel() != rows * terms:
            raise IrisError(f"iris: residual_norm's bias needs ids, int32 contiguous [{rows}, {terms}]")
        if bias.shape[-1] != n:
            raise IrisError(f"iris: residual_norm bias {tuple(bias.shape)} for rows of {n}")
        bias_rows = bias.numel() // n
    if weights is not None:
        weights = _bf16_dense(weights.contiguous(), "the term weights")
        if weights.numel() != rows * terms:
            raise IrisError(f"iris: residual_norm weights of {weights.numel()} elements for {rows} x {terms} terms")
    x_out, h = torch.empty_like(xb), torch.empty_like(xb)
    msg = _msg()
    stream = torch.cuda.current_stream(x.device).cuda_stream
    t._check(t._lib().iris_cuda_residual_norm(xb.data_ptr(), yb.data_ptr(), rows, terms, n,
                                              bias.data_ptr() if bias is not None else None, bias_rows,
                                              ids.data_ptr() if bias is not None else None,
                                              weights.data_ptr() if weights is not None else None, norm_w.data_ptr(), eps,
                                              1 if weight_in_f32 else 0, x_out.data_ptr(), h.data_ptr(), stream, msg, len(msg)), msg)
    return x_out.view(x.shape), h.view(x.shape)


@residual_norm.register_fake
def _(x, y, norm_w, eps, weight_in_f32, bias=None, ids=None, weights=None):
    return x.new_empty(x.shape, dtype=torch.bfloat16), x.new_empty(x.shape, dtype=torch.bfloat16)


@torch.library.custom_op("iris::gated_silu", mutates_args=())
def gated_silu(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """A gated MLP's activation in one launch (iris_cuda_gated_silu): silu(gate) * up for gate
    and up [R, N] (or [N]) BF16 on one CUDA device, rounded to BF16 after the SiLU and after
    the product as transformers' BF16 steps round. Each row's elements must be contiguous;
    rows may be strided, so the two halves of one [R, 2N] projection output serve as they are.
    Returns [R, N] (or [N]) BF16."""
    from ._errors import IrisError

    if gate.shape != up.shape or gate.dim() not in (1, 2):
        raise IrisError(f"iris: gated_silu gate {tuple(gate.shape)} and up {tuple(up.shape)} must be one [R, N] or [N] shape")
    for t_, what in ((gate, "gate"), (up, "up")):
        if t_.dtype != torch.bfloat16 or not t_.is_cuda or t_.device != gate.device or (t_.shape[-1] > 1 and t_.stride(-1) != 1):
            raise IrisError(f"iris: gated_silu {what} must be BF16 on gate's CUDA device with contiguous rows "
                            f"(got {t_.dtype} on {t_.device}, strides {tuple(t_.stride())})")
    n = gate.shape[-1]
    rows = gate.shape[0] if gate.dim() == 2 else 1
    stride = lambda t_: t_.stride(0) if gate.dim() == 2 and rows > 1 else n  # noqa: E731
    out = torch.empty(gate.shape, dtype=torch.bfloat16, device=gate.device)
    t, msg = _t(), _msg()
    stream = torch.cuda.current_stream(gate.device).cuda_stream
    t._check(t._lib().iris_cuda_gated_silu(gate.data_ptr(), up.data_ptr(), rows, n, stride(gate), stride(up), out.data_ptr(), stream,
                                           msg, len(msg)), msg)
    return out


@gated_silu.register_fake
def _(gate, up):
    return gate.new_empty(gate.shape, dtype=torch.bfloat16)
