"""The pieces every family's decode step is made of, on [1, features] BF16 rows: projections
(the fused GEMV for a quantized weight, cuBLAS for a dense one), expert stacks (the grouped
expert GEMV), RMSNorm, rotary tables and the static KV cache. Nothing here synchronizes with
the host or allocates outside torch's allocator, so a step captures into a CUDA graph."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from .. import _exact_sum
from .._errors import IrisError
from ..torch import Experts, QuantTensor

_EXACT = _exact_sum.torch_backend()


def _exact_partial(w: torch.Tensor, x: torch.Tensor, out_of_range: torch.Tensor) -> torch.Tensor:
    """x w^T in the order-free arithmetic (iris_archive._exact_sum): the limbs [3, B, N] int64,
    which ranks add with an int64 all_reduce. A product beyond the limbs' range sets
    `out_of_range` on the device (a test on the host would wait for the GPU every step)."""
    return _exact_sum.partial_limbs(w, x, _EXACT, out_of_range=out_of_range)


def exact_sums(partial: torch.Tensor) -> torch.Tensor:
    """FP32 sums from a partial result: the limbs of the exact mode, or FP32 sums as they are."""
    return _exact_sum.finish(partial, _EXACT) if partial.dtype == torch.int64 else partial


def exact_f32(w: torch.Tensor, x: torch.Tensor, out_of_range: torch.Tensor) -> torch.Tensor:
    """x w^T as FP32 sums, in the order-free arithmetic (a projection split by rows, or whole)."""
    return exact_sums(_exact_partial(w, x, out_of_range))


def round_dense(sums: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """A dense projection's BF16 output from its FP32 sums: the bias added before the rounding,
    as iris's dense GEMV and cuBLAS's bias epilogue add it."""
    return (sums + bias.float()).to(torch.bfloat16) if bias is not None else sums.to(torch.bfloat16)


class Linear:
    """y = x W^T (+ b) for W [N, K] from the weights: torch.ops.iris.gemv for a quantized W,
    F.linear (cuBLAS) for a dense one."""

    def __init__(self, weights, prefix: str, bias: bool | None = None):
        """bias None: taken when the weights have one; False: none; True: required."""
        self.name = prefix + ".weight"
        self.w = weights.take(self.name)
        self.b = weights.take(prefix + ".bias", required=bool(bias)) if bias is not False else None
        self.n, self.k = int(self.w.shape[0]), int(self.w.shape[1])
        self.quantized = isinstance(self.w, QuantTensor)
        self.nbytes = weights.nbytes(prefix + ".weight") + (weights.nbytes(prefix + ".bias") if self.b is not None else 0)
        self.iris_dense = False  # use_iris_dense_gemv() sets it
        self.iris_logits = False  # use_iris_dense_logits() sets it
        self.exact_range = None  # use_exact_sums() sets it: then the exact mode, this its range flag

    def read_bytes(self, times: int = 1) -> int:
        return self.nbytes * times

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if self.exact_range is not None:
            return self.finish_f32(self.partial_f32(x))
        if self.quantized:
            y = torch.ops.iris.gemv(x, self.w._handle, self.n)
            return y + self.b if self.b is not None else y
        if self.iris_dense:
            return torch.ops.iris.gemv_bf16(x, self.w, self.b)
        return F.linear(x, self.w, self.b)

    def partial_f32(self, x: torch.Tensor) -> torch.Tensor:
        """x W^T as FP32 sums, before their rounding and without the bias: a tensor-parallel
        rank's share of a projection split by columns (models/_parallel.py). In the exact
        mode, the limbs (exact_sums() makes the FP32 sums of them)."""
        if self.exact_range is not None:
            return _exact_partial(self.w, x, self.exact_range)
        if self.quantized:
            return torch.ops.iris.gemv_f32(x, self.w._handle, self.n)
        if self.w.dtype == torch.bfloat16 and self.w.is_cuda:
            return torch.ops.iris.gemv_bf16_f32(x, self.w, None)
        return F.linear(x.float(), self.w.float())

    def finish_f32(self, sums: torch.Tensor) -> torch.Tensor:
        """The output from the whole FP32 sums, rounded where __call__ rounds: a quantized
        weight's GEMV rounds to BF16 before its bias is added, a dense one (iris's dense GEMV,
        and cuBLAS's bias epilogue) after. Takes the exact mode's limbs too."""
        sums = exact_sums(sums)
        if self.quantized and self.b is not None:
            return sums.to(torch.bfloat16) + self.b
        return round_dense(sums, self.b)

    def logits(self, x: torch.Tensor) -> torch.Tensor:
        """The output as a model's logits, in FP32: the GEMV's FP32 sums for a quantized
        weight, logits_f32 for a dense one (with a bias: the BF16 output, widened)."""
        if self.b is not None:
            return self(x).float()
        if self.exact_range is not None:
            return exact_f32(self.w, x, self.exact_range)
        if self.quantized:
            return torch.ops.iris.gemv_f32(x, self.w._handle, self.n)
        if self.iris_logits:
            return torch.ops.iris.gemv_bf16_f32(x, self.w, None)
        return logits_f32(x, self.w)


class GroupedLinear:
    """Projections of one input (q, k and v; gate and up) in one launch. Quantized ones: the
    grouped expert GEMV, ids 0, 1, ... all on row 0 of x; each output is bit for bit the
    single GEMV's where the projections have one height (k and v, gate and up). With `fuse`
    also over row blocks of the smallest height (q cut into k's height, then k and v: q's sums
    then come in another order than q's own GEMV), and dense ones concatenated once into one
    [sum N, K] matrix for one GEMV (what engines do for the BF16 peer; cuBLAS too rounds its
    sums in another order then). A last-bit difference matters where a router's near-tie
    turns it into another expert, so without `fuse` the arithmetic stays transformers'.
    Otherwise, and where the weights do not fit one launch (mixed, other formats, heights that
    do not divide), one Linear each. Returns one [1, N_i] output per projection."""

    def __init__(self, weights, prefixes: list, device, fuse: bool = True):
        parts = [Linear(weights, p) for p in prefixes]
        self.parts, self.quantized = parts, parts[0].quantized
        self.nbytes = sum(p.nbytes for p in parts)
        self.sizes = [p.n for p in parts]
        self.mode = "separate"
        same_k = len({(p.k, p.quantized) for p in parts}) == 1
        if same_k and self.quantized and len({p.w.format for p in parts}) == 1:
            height = min(self.sizes)
            if all(n % height == 0 for n in self.sizes) and (fuse or len(set(self.sizes)) == 1):
                try:
                    self.experts = Experts([p.w for p in parts], rows=height)
                    count = sum(self.sizes) // height
                    self.ids = torch.arange(count, dtype=torch.int32, device=device)
                    self.rows = torch.zeros(count, dtype=torch.int32, device=device)
                    self.height, self.mode = height, "grouped"
                except IrisError:
                    pass  # another geometry each, or heights the tiles do not allow: one launch each
        elif same_k and not self.quantized and fuse:
            self.w = torch.cat([p.w for p in parts])
            for p, prefix in zip(parts, prefixes):
                weights.release(prefix + ".weight")  # the concatenated copy replaces them
                p.w = None
            self.mode = "concatenated"
        self.iris_dense = False  # use_iris_dense_gemv() sets it
        self.exact_range = None  # use_exact_sums() sets it (then its parts' too)
        if self.mode != "separate" and any(p.b is not None for p in parts):
            zero = lambda p: p.b if p.b is not None else torch.zeros(p.n, dtype=torch.bfloat16, device=device)  # noqa: E731
            self.b = torch.cat([zero(p) for p in parts]).view(1, -1)
        else:
            self.b = None
        # gated() serves, and pays: two quantized projections of one height (gate and up) in one
        # grouped launch, without a bias, whose launch libiris says takes the activation in its
        # own store (Experts.gated_in_launch: on an H200, Llama-3-8B, ms/token, MXFP4 2.463-2.470
        # against 2.507-2.511 with the activation's own launch, NF4 2.915-2.922 against
        # 2.960-2.974, FP8 block 3.255 against 3.279, kernels/NOTES.md v67; where the store would
        # cost the launch blocks a SM, as NF4's register-twin kernel's did before v67, libiris
        # would run the plain launch into the exchange and the activation's own after it, which
        # the model does better without the exchange). Its exchange (zero between launches) is
        # made only then.
        self.takes_gated = (self.mode == "grouped" and len(parts) == 2 and self.sizes[0] == self.sizes[1] and self.b is None
                            and self.experts.gated_in_launch)
        if self.takes_gated:
            need = int(self.experts._lib.iris_cuda_experts_gated_exchange(self.experts._handle, 2))
            self.exchange = torch.zeros(need, dtype=torch.int32, device=device)

    def read_bytes(self, times: int = 1) -> int:
        return self.nbytes * times

    def gated(self, x: torch.Tensor) -> torch.Tensor:
        """silu(gate) * up of the two projections, the activation inside their launch
        (torch.ops.iris.gemv_experts_gated): [1, N]. takes_gated must hold."""
        return torch.ops.iris.gemv_experts_gated(x, self.ids, self.rows, self.experts._handle, self.height, self.exchange)

    def __call__(self, x: torch.Tensor) -> list:
        if self.mode == "separate":
            return [p(x) for p in self.parts]
        if self.exact_range is not None:  # one dense matrix (exact mode's weights are never grouped quantized)
            y = round_dense(exact_f32(self.w, x, self.exact_range), self.b)
            return list(torch.split(y, self.sizes, dim=1))
        if self.mode == "grouped":
            y = torch.ops.iris.gemv_experts(x, self.ids, self.rows, self.experts._handle, self.height).view(1, -1)
        elif self.iris_dense:
            return list(torch.split(torch.ops.iris.gemv_bf16(x, self.w, self.b.view(-1)), self.sizes, dim=1))
        else:
            y = F.linear(x, self.w)
        if self.b is not None:
            y = y + self.b
        return list(torch.split(y, self.sizes, dim=1))


def use_iris_dense_gemv(part) -> None:
    """Runs a dense BF16 projection that has a bias (a Linear, or a GroupedLinear concatenated
    into one matrix) on torch.ops.iris.gemv_bf16, the bias in the same launch: cuBLAS takes a
    bias as a split-K GEMV plus a reduction, or as a separate add. Projections without a bias
    stay on cuBLAS, which reads large ones faster than a copy does."""
    dense = getattr(part, "w", None) is not None and not part.quantized and part.w.dtype == torch.bfloat16 and part.w.dim() == 2
    if dense and part.b is not None and (not isinstance(part, GroupedLinear) or part.mode == "concatenated"):
        part.iris_dense = True


def use_exact_sums(part, out_of_range: torch.Tensor) -> None:
    """Runs a projection (Linear, GroupedLinear, ExpertStack, a tied head) in the order-free
    arithmetic of iris_archive._exact_sum: its outputs then do not depend on how the ranks of a
    tensor-parallel decode split its rows or columns. Its weights must be dense (the exact
    mode's loader dequantizes them to FP32, exactly), but for an expert stack whose picked
    experts each call can dequantize (Experts.dequantizes: MXFP4). `out_of_range` (a boolean
    scalar on the device, shared by the model's projections) is set where a product leaves the
    limbs' range."""
    for p in getattr(part, "parts", ()):
        use_exact_sums(p, out_of_range)
    if part.quantized and not (isinstance(part, ExpertStack) and part.experts.dequantizes):
        raise IrisError(f"tensor '{getattr(part, 'name', '?')}': the exact sums take dense weights (dequantized), not a QuantTensor")
    part.exact_range = out_of_range


def use_iris_dense_logits(head) -> None:
    """Runs a dense BF16 lm_head without a bias (a Linear, or a tied embedding) on
    torch.ops.iris.gemv_bf16_f32: the FP32 logits, as logits_f32 gives them, from iris's dense
    GEMV, which read gpt-oss's 201088x2880 head in 372 us where cuBLAS took 410 (H100,
    bench/dense_bf16_bench.py, kernels/NOTES.md run v61)."""
    w = getattr(head, "w", None)
    if w is not None and not head.quantized and head.b is None and w.dtype == torch.bfloat16 and w.dim() == 2 and w.is_contiguous():
        head.iris_logits = True


class ExpertStack:
    """One MoE projection over the experts the router picked: y[p] = W[ids[p]] @ x[rows[p]].
    Quantized: the grouped expert GEMV, reading only the picked experts' tiles. Dense (the
    BF16 reference): the picked matrices gathered, then one batched matmul.

    `tensors` is an [E, N, K] stack (gpt-oss) or a list of E [N, K] matrices (Mixtral)."""

    def __init__(self, tensors, nbytes: int):
        first = tensors if not isinstance(tensors, list) else tensors[0]
        self.quantized = isinstance(first, QuantTensor)
        if self.quantized:
            self.experts = Experts(tensors)
            self.count, self.n = self.experts.count, self.experts.n
        else:
            self.stack = tensors if not isinstance(tensors, list) else torch.stack(tensors)
            self.count, self.n = int(self.stack.shape[0]), int(self.stack.shape[1])
        self.nbytes_per_expert = nbytes // self.count
        self.columns_split = False  # a tensor-parallel rank's columns only (the decoder sets it)
        self.exact_range = None  # use_exact_sums() sets it: then the exact mode, this its range flag

    def read_bytes(self, experts: int) -> int:
        return self.nbytes_per_expert * experts

    @property
    def reads_nothing_for_negative_ids(self) -> bool:
        """Whether an id of -1 (another rank's expert) costs nothing here: the quantized launches
        read nothing for it; a dense gather, and the exact mode's dequantize, need a real index."""
        return self.quantized and self.exact_range is None

    def swiglu(self, x: torch.Tensor, ids: torch.Tensor, rows: torch.Tensor | None, bias: torch.Tensor | None, alpha: float,
               limit: float) -> torch.Tensor:
        """gpt-oss's gate_up projection and its activation in one launch (quantized stacks only):
        [P, N / 2], see torch.ops.iris.gemv_experts_swiglu."""
        return torch.ops.iris.gemv_experts_swiglu(x, ids, rows, self.experts._handle, self.n, bias, alpha, limit)

    def partial_f32(self, x: torch.Tensor, ids: torch.Tensor, rows: torch.Tensor | None) -> torch.Tensor:
        """__call__'s FP32 sums before their rounding: a tensor-parallel rank's share of an
        expert projection split by columns. In the exact mode, the limbs."""
        if self.quantized and self.exact_range is None:
            return torch.ops.iris.gemv_experts_f32(x, ids, rows, self.experts._handle, self.n)
        xs = x if rows is None else x.index_select(0, rows.long())
        # The exact mode on a quantized stack: the picked experts dequantized, FP32 [P, N, K].
        w = self.experts.dequantize(ids) if self.quantized else self.stack.index_select(0, ids.long())
        if self.exact_range is not None:
            return _exact_partial(w, xs, self.exact_range)
        return torch.bmm(w.float(), xs.float().unsqueeze(-1)).squeeze(-1)

    def finish_f32(self, sums: torch.Tensor) -> torch.Tensor:
        """The output from the whole sums (FP32, or the exact mode's limbs), rounded as __call__ rounds."""
        return exact_sums(sums).to(torch.bfloat16)

    def __call__(self, x: torch.Tensor, ids: torch.Tensor, rows: torch.Tensor | None) -> torch.Tensor:
        if self.exact_range is not None:
            return self.finish_f32(self.partial_f32(x, ids, rows))
        if self.quantized:
            return torch.ops.iris.gemv_experts(x, ids, rows, self.experts._handle, self.n)
        xs = x if rows is None else x.index_select(0, rows.long())
        w = self.stack.index_select(0, ids.long())  # [P, N, K]
        return torch.bmm(w, xs.unsqueeze(-1)).squeeze(-1)


def rms_norm(x: torch.Tensor, w: torch.Tensor, eps: float, weight_in_f32: bool = False) -> torch.Tensor:
    """transformers' RMSNorm: normalized in FP32; Llama casts back to the input dtype before
    the weight multiplies, gpt-oss after (weight_in_f32)."""
    xf = x.float()
    xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return (w * xf).to(x.dtype) if weight_in_f32 else w * xf.to(x.dtype)


def norm_steps(eps: float, weight_in_f32: bool = False):
    """A pre-norm decoder's norm steps (rms_norm): embed_norm(token, embed, weight) -> the
    embedding row and its norm; add_norm(x, y, weight) -> the residual x + y and its norm;
    norm(x, weight) -> the norm alone (a tensor-parallel rank's embedding row comes from an
    exchange, Decoder._embed)."""
    def norm(x, weight):
        return rms_norm(x, weight, eps, weight_in_f32)

    def embed_norm(token, embed, weight):
        x = F.embedding(token, embed)
        return x, norm(x, weight)

    def add_norm(x, y, weight):
        x = x + y
        return x, norm(x, weight)

    return embed_norm, add_norm, norm


def _rope_parameters(config: dict) -> dict:
    """rope_theta and the scaling entries, from transformers 5's `rope_parameters` or the older
    `rope_theta` + `rope_scaling`."""
    p = dict(config.get("rope_parameters") or {})
    scaling = config.get("rope_scaling") or {}
    for key, value in scaling.items():
        p.setdefault(key, value)
    if "type" in p and "rope_type" not in p:
        p["rope_type"] = p["type"]
    p.setdefault("rope_theta", config.get("rope_theta", 10000.0))
    p.setdefault("rope_type", "default")
    return p


def rope_inv_freq(config: dict, head_dim: int) -> tuple[torch.Tensor, float]:
    """Inverse frequencies and attention scaling of the config's RoPE (default, linear, llama3,
    yarn), computed as transformers' modeling_rope_utils does, in FP32."""
    p = _rope_parameters(config)
    base, kind = float(p["rope_theta"]), p["rope_type"]
    dim = int(head_dim * float(p.get("partial_rotary_factor", config.get("partial_rotary_factor", 1.0))))
    exponents = torch.arange(0, dim, 2, dtype=torch.int64).float() / dim
    inv_freq = 1.0 / (base ** exponents)
    if kind == "default":
        return inv_freq, 1.0
    if kind == "linear":
        return inv_freq / float(p["factor"]), 1.0
    if kind == "llama3":
        factor, low, high = float(p["factor"]), float(p["low_freq_factor"]), float(p["high_freq_factor"])
        old = float(p["original_max_position_embeddings"])
        low_wavelen, high_wavelen = old / low, old / high
        wavelen = 2 * math.pi / inv_freq
        scaled = torch.where(wavelen > low_wavelen, inv_freq / factor, inv_freq)
        smooth = (old / wavelen - low) / (high - low)
        smoothed = (1 - smooth) * scaled / factor + smooth * scaled
        medium = ~(wavelen < high_wavelen) * ~(wavelen > low_wavelen)
        return torch.where(medium, smoothed, scaled), 1.0
    if kind == "yarn":
        original = p.get("original_max_position_embeddings") or config["max_position_embeddings"]
        factor = p.get("factor") or config["max_position_embeddings"] / original
        factor = float(factor)

        def mscale_of(scale, m=1.0):
            return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0

        attention = p.get("attention_factor")
        if attention is None:
            m, m_all = p.get("mscale"), p.get("mscale_all_dim")
            attention = mscale_of(factor, m) / mscale_of(factor, m_all) if m and m_all else mscale_of(factor)
        beta_fast, beta_slow = p.get("beta_fast") or 32, p.get("beta_slow") or 1

        def correction_dim(rotations):
            return (dim * math.log(original / (rotations * 2 * math.pi))) / (2 * math.log(base))

        low, high = correction_dim(beta_fast), correction_dim(beta_slow)
        if p.get("truncate", True):
            low, high = math.floor(low), math.ceil(high)
        low, high = max(low, 0), min(high, dim - 1)
        if low == high:
            high += 0.001
        ramp = torch.clamp((torch.arange(dim // 2, dtype=torch.float32) - low) / (high - low), 0, 1)
        pos_freqs = base ** exponents
        extrapolation = 1 - ramp
        inv_freq = (1.0 / (factor * pos_freqs)) * (1 - extrapolation) + (1.0 / pos_freqs) * extrapolation
        return inv_freq, float(attention)
    raise IrisError(f"config.json: rope_type '{kind}' is not supported by iris.models")


def rope_tables(config: dict, head_dim: int, max_len: int, dtype, device) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin [max_len, head_dim] (the half-dim frequencies repeated, as transformers' emb =
    cat(freqs, freqs)), times the attention scaling, in FP32 then cast to `dtype`."""
    inv_freq, scaling = rope_inv_freq(config, head_dim)
    positions = torch.arange(max_len, dtype=torch.float32)
    freqs = positions[:, None] * inv_freq[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    return (emb.cos() * scaling).to(dtype).to(device), (emb.sin() * scaling).to(dtype).to(device)


def logits_f32(h: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """h @ w.T with FP32 output (cuBLAS accumulates in FP32 either way; rounding the logits to
    BF16 would make exact ties among a large vocabulary common, and greedy picks then turn on
    the tie-break). Where this torch has no out_dtype: the BF16 product, widened."""
    try:
        return torch.mm(h, w.t(), out_dtype=torch.float32)
    except (TypeError, RuntimeError):
        return F.linear(h, w).float()


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x [heads, head_dim] rotated by the position's cos, sin [1, head_dim] (rotate_half form)."""
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos + rotated * sin


class KVCache:
    """K and V of every layer, [layers, 2 (k, v), kv_heads, max_len, head_dim]: a step writes
    position `pos` (a device tensor) of both with one index_copy_ (write), so the same graph
    serves every position and the write is one kernel."""

    def __init__(self, layers: int, kv_heads: int, max_len: int, head_dim: int, dtype, device):
        self.kv = torch.zeros(layers, 2, kv_heads, max_len, head_dim, dtype=dtype, device=device)
        self.k, self.v = self.kv[:, 0], self.kv[:, 1]
        self.max_len = max_len


def write_kv(cache_layer: torch.Tensor, pos: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
    """k, v [kv_heads, head_dim] into cache_layer [2, kv_heads, max_len, head_dim] at `pos`."""
    cache_layer.index_copy_(2, pos, torch.stack((k, v)).unsqueeze(2))


def rope_and_write_kv(q, k, v, cos_table, sin_table, cache_layer, pos):
    """q and k rotated to position `pos` (a device tensor: the tables' row is picked on the
    GPU); k and v written at `pos` of this layer's cache. q, k, v: [heads, dim]; returns q."""
    cos, sin = cos_table.index_select(0, pos), sin_table.index_select(0, pos)
    write_kv(cache_layer, pos, apply_rope(k, cos, sin), v)
    return apply_rope(q, cos, sin)
