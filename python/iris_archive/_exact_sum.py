"""Dot products whose value does not depend on the order of their terms, nor on how the
reduced dimension K is split between processes: the arithmetic that lets a tensor-parallel
decode give one GPU's bits (issue 27; kernels/NOTES.md, "Next (after v69)").

A GEMV's FP32 sums depend on the order of their additions, and a rank of a tensor-parallel
decode sums its columns of o or down in another order than one GPU does: the sums differ in an
ulp, and at full size the tokens part at near ties. Here instead:

- each product p = x_k w_k of a BF16 or FP32 activation and an FP32 weight is exact in FP64
  (8 + 24 or 24 + 24 significand bits, within FP64's 53);
- each is cut to a fixed-point grid as two int64 limbs, hi = floor(p 2^8) and
  lo = floor((p 2^8 - hi) 2^45), so p is hi 2^-8 + lo 2^-53 less a part below 2^-53 that is
  a function of p alone;
- integer addition is associative, so the limbs' sums over any order, grouping or split of K
  are the same integers (ranks add theirs with an int64 all_reduce, exact in any order);
- one rounding at the end, from the two sums, is then the same everywhere.

Ranges: |p| < 2^37 and K <= 2^17 keep both sums inside int64 (each |hi| < 2^45 and each lo
<= 2^45, 2^17 of them). A row with a non-finite product is NaN.

The functions take a `Backend` (numpy, or torch where a decoder runs them), so that the CPU
reference the tests check and the GPU path are one text.

A projection's partial result, as ranks exchange it, is its limbs in one int64 array [3, B, N]:
the sums of hi and of lo, and how many of each row's products were not finite. Ranks add them
with an int64 all_reduce (exact in any order); `finish` makes the FP32 sums of them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

HI_SCALE = 2.0 ** 8       # hi counts units of 2^-8
LO_SCALE = 2.0 ** 45      # lo counts units of 2^-53 within one unit of hi
MAX_PRODUCT = 2.0 ** 37   # |p| below this keeps |hi| < 2^45
MAX_TERMS = 2 ** 17       # 2^17 terms of < 2^45 each stay below 2^62


@dataclass(frozen=True)
class Backend:
    floor: Callable[[Any], Any]
    to_int64: Callable[[Any], Any]
    to_float64: Callable[[Any], Any]
    to_float32: Callable[[Any], Any]
    isfinite: Callable[[Any], Any]
    where: Callable[[Any, Any, Any], Any]
    stack: Callable[[list], Any]
    cat: Callable[[list, int], Any]
    logical_or: Callable[..., Any]


def numpy_backend() -> Backend:
    import numpy as np

    return Backend(np.floor, lambda a: a.astype(np.int64), lambda a: a.astype(np.float64), lambda a: a.astype(np.float32),
                   np.isfinite, np.where, np.stack, lambda parts, axis: np.concatenate(parts, axis=axis), np.logical_or)


def torch_backend() -> Backend:
    import torch

    return Backend(torch.floor, lambda a: a.to(torch.int64), lambda a: a.to(torch.float64), lambda a: a.to(torch.float32),
                   torch.isfinite, torch.where, torch.stack, lambda parts, axis: torch.cat(parts, dim=axis), torch.logical_or)


def product_limbs(p, be: Backend):
    """The limbs (hi, lo) of finite FP64 products `p` (any shape), each a function of its p alone."""
    a = p * HI_SCALE
    hi = be.floor(a)
    lo = be.floor((a - hi) * LO_SCALE)  # a - hi is exact where |a| >= 1; else a deterministic round
    return be.to_int64(hi), be.to_int64(lo)


def matvec_limbs(w, x, be: Backend, out_of_range=None):
    """For weights w [N, K] (FP32 values) and activations x [B, K] (BF16 or FP32 values): the
    limb sums (hi, lo), each [B, N] int64, and which rows had a non-finite product ([B, N];
    such products count as 0 in the limbs). With w [B, N, K], row b of x meets matrix b of w
    (an expert GEMV's pairs). A product beyond the limbs' range is refused; with out_of_range
    (a boolean scalar array) it sets that instead, on the device, with no wait for a GPU to
    answer (the limbs then wrap: equal on every rank, but wrong). K is the whole sum's: a
    rank's slice must not pass for it (2^17 terms in all)."""
    k = w.shape[-1]
    if k > MAX_TERMS:
        raise ValueError(f"exact sums: K = {k} terms, more than the {MAX_TERMS} that int64 limbs hold")
    wf = be.to_float64(w)
    p = be.to_float64(x)[:, None, :] * (wf if len(w.shape) == 3 else wf[None, :, :])
    finite = be.isfinite(p)
    bad = ~finite.all(-1)
    p = be.where(finite, p, 0.0)
    beyond = (abs(p) >= MAX_PRODUCT).any()
    if out_of_range is not None:
        be.logical_or(out_of_range, beyond, out=out_of_range)
    elif bool(beyond):
        raise ValueError("exact sums: a product of magnitude 2^37 or more, beyond the int64 limbs' range")
    hi, lo = product_limbs(p, be)
    return hi.sum(-1), lo.sum(-1), bad


def limbs_value(hi, lo, bad, be: Backend):
    """The FP64 value of limb sums (one rounding each of hi and lo to FP64, then their sum:
    deterministic, so equal limbs give equal bits); NaN where a product was not finite."""
    value = be.to_float64(hi) * (1.0 / HI_SCALE) + be.to_float64(lo) * (1.0 / (HI_SCALE * LO_SCALE))
    return be.where(bad, value * float("nan"), value)


def partial_limbs(w, x, be: Backend, budget: int = 1 << 28, out_of_range=None):
    """x [B, K] against w [N, K] (or [B, N, K]: row b against matrix b): the limbs [3, B, N]
    int64 (hi, lo, non-finite products), about `budget` bytes of temporaries at a time (some
    72 a weight and batch row live at once: FP64 weights and products, the masked products,
    the scaled ones, both limbs as floats and as int64)."""
    n, k, b = int(w.shape[-2]), int(w.shape[-1]), int(x.shape[0])
    step = max(1, budget // (72 * k * b))
    out = []
    for r0 in range(0, n, step):
        rows = w[r0 : r0 + step] if len(w.shape) == 2 else w[:, r0 : r0 + step]
        hi, lo, bad = matvec_limbs(rows, x, be, out_of_range)
        out.append(be.stack([hi, lo, be.to_int64(bad)]))
    return be.cat(out, -1)


def finish(limbs, be: Backend):
    """The FP32 sums [B, N] of limbs [3, B, N], summed over ranks or not: FP64 from the two
    limb sums, then FP32; NaN where a product was not finite."""
    return be.to_float32(limbs_value(limbs[0], limbs[1], limbs[2] != 0, be))
