"""A slow, plain numpy decoder of every format, written from formats/FORMAT.md alone (sections
4, 5 and 6): the fallback when libiris is absent, and an independent check of it."""

from __future__ import annotations

import numpy as np

from ._errors import IrisError

CANONICAL_NAN = np.uint32(0x7FC00000)


def _f32(bits: np.ndarray) -> np.ndarray:
    return bits.astype(np.uint32).view(np.float32)


def e2m1_table() -> np.ndarray:
    """OCP E2M1: sign bit 3, exponent bits 2..1 (bias 1), mantissa bit 0."""
    mags = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]
    return np.array(mags + [-m for m in mags], dtype=np.float32)


def e8m0_table() -> np.ndarray:
    """2^(e-127) for e < 255 (byte 0 is the FP32 subnormal 2^-127); 0xFF is NaN."""
    bits = np.arange(256, dtype=np.uint32) << 23
    bits[0] = 0x00400000
    bits[255] = CANONICAL_NAN
    return _f32(bits)


def e4m3_table() -> np.ndarray:
    """E4M3 "fn": bias 7, subnormals m * 2^-9, 0x7F/0xFF NaN, no Inf."""
    out = np.empty(256, dtype=np.float32)
    for b in range(256):
        s, e, m = b >> 7, (b >> 3) & 15, b & 7
        if e == 15 and m == 7:
            v = np.nan
        elif e == 0:
            v = m * 2.0 ** -9
        else:
            v = (1 + m / 8) * 2.0 ** (e - 7)
        out[b] = -v if s else v
    return out


def rows_of(t) -> tuple:
    """(rows, K): the tensor viewed as [rows, K] row-major, K its last dimension (as libiris's
    iris_dequantize_rows views it; rows is 0 when the tensor is empty)."""
    k = t.shape[-1] if t.shape else 1
    n_el = int(np.prod(t.shape, dtype=np.uint64)) if t.shape else 1
    return (n_el // k if k else 0), k


def untile(t, codes: np.ndarray, r0: int = 0, r1: int = None) -> np.ndarray:
    """Tiled codes (section 5) -> row-major [r1 - r0, stored row bytes]: rows [r0, r1) of the
    [batch * n] rows. Only the stripes of tile_n rows that hold them are read, so a slice of
    a big weight touches its own share of the mapping."""
    g = t._geometry
    bits, tn, tk, n = g["bits"], g["tile_n"], g["tile_k"], g["n"]
    row_bytes, tile_row, width = g["padded_k"] * bits // 8, tk * bits // 8, g["stored_k"] * bits // 8
    r1 = g["batch"] * n if r1 is None else r1
    c = codes.reshape(g["batch"], g["padded_n"] // tn, g["padded_k"] // tk, tn, tile_row)
    parts, r = [], r0
    while r < r1:
        b, i0 = divmod(r, n)
        if i0 == 0 and r1 - r >= n:  # whole matrices of the stack: one reshape for all of them
            nb = (r1 - r) // n
            rows = c[b : b + nb].transpose(0, 1, 3, 2, 4).reshape(nb, g["padded_n"], row_bytes)[:, :n, :width]
            parts.append(rows.reshape(nb * n, width))
            r += nb * n
        else:  # part of one matrix: its stripes s0 .. s1 only
            i1 = min(n, i0 + r1 - r)
            s0, s1 = i0 // tn, -(-i1 // tn)
            rows = c[b, s0:s1].transpose(0, 2, 1, 3).reshape((s1 - s0) * tn, row_bytes)
            parts.append(rows[i0 - s0 * tn : i1 - s0 * tn, :width])
            r += i1 - i0
    if not parts:
        return np.zeros((0, width), dtype=np.uint8)
    return np.ascontiguousarray(parts[0] if len(parts) == 1 else np.concatenate(parts))


def _canonical(x: np.ndarray) -> np.ndarray:
    nan = np.isnan(x)
    if nan.any():
        x = x.copy()
        x.view(np.uint32)[nan] = CANONICAL_NAN
    return x


def _nibbles_high_first(packed: np.ndarray) -> np.ndarray:
    nib = np.empty(packed.size * 2, dtype=np.uint8)
    nib[0::2] = packed >> 4  # element 2j in the HIGH nibble
    nib[1::2] = packed & 15
    return nib


def _bnb_rows(t, c, e0: int, e1: int) -> np.ndarray:
    """Elements [e0, e1) of an nf4 / bnb_fp4 tensor in element order (section 4.3): the codes
    of those elements and the absmax of the blocks they lie in, nothing else."""
    p, k = t._typed, rows_of(t)[1]
    if t.layout["kind"] == "tiled":  # each block lies in one row (K is a multiple of block_size)
        nib = _nibbles_high_first(untile(t, c["codes"], e0 // k, e1 // k).reshape(-1))
    else:  # flat: the bytes of the elements; a row may begin in the low nibble of a byte
        nib = _nibbles_high_first(np.asarray(c["codes"][e0 // 2 : -(-e1 // 2)]))[e0 % 2 :][: e1 - e0]
    bs = p["block_size"]
    b0, b1 = e0 // bs, -(-e1 // bs)
    if p["double_quant"]:
        blocks = np.arange(b0, b1)
        nested = c["nested_absmax"][blocks // p["nested_block_size"]]
        absmax = c["nested_code_table"][c["absmax"][b0:b1]] * nested  # two separately rounded FP32 steps
        absmax = absmax + np.float32(p["nested_offset"])
    else:
        absmax = c["absmax"][b0:b1]
    return c["code_table"][nib] * absmax[np.arange(e0, e1) // bs - b0]


def _fp8_scales(t, s: np.ndarray, r0: int, r1: int) -> np.ndarray:
    """The FP32 scale of every element of rows [r0, r1), broadcastable to [r1 - r0, K]."""
    p, g = t._typed, t._geometry
    b, n, k = g["batch"], g["n"], g["k"]
    if p["scale_dtype"] == "bf16":
        s = _f32(s.astype(np.uint32) << 16)
    s = s.astype(np.float32).reshape(-1)
    rows = np.arange(r0, r1)
    gran = p["granularity"]
    if gran == "tensor":
        return s[rows // n][:, None]
    if gran == "channel":
        return s[rows][:, None]
    if gran == "block":
        grid = s.reshape(b, -(-n // p["block_n"]), -(-k // p["block_k"]))
        return grid[rows // n, (rows % n) // p["block_n"]][:, np.arange(k) // p["block_k"]]
    grid = s.reshape(b * n, -(-k // p["group_size"]))
    return grid[rows][:, np.arange(k) // p["group_size"]]


def _int_group_rows(t, c, r0: int, r1: int) -> np.ndarray:
    """int_group (section 4.5): (code - zero) * scale [* post_factor], rounded once to the scale's
    dtype, placed at the permutation's columns."""
    p = t._typed
    k, bits, gs = t.shape[-1], p["bits"], p["group_size"]
    n = t.shape[-2]
    rows = untile(t, c["codes"], r0, r1)
    bitpos = np.arange(k, dtype=np.int64) * bits
    lo = rows[:, bitpos >> 3].astype(np.uint32)
    hi = np.concatenate([rows, np.zeros((rows.shape[0], 1), np.uint8)], axis=1)[:, (bitpos >> 3) + 1].astype(np.uint32)
    q = (((lo | (hi << 8)) >> (bitpos & 7).astype(np.uint32)) & ((1 << bits) - 1)).astype(np.int64)
    groups = -(-k // gs)
    gi = np.arange(k) // gs
    zeros = (c["zero_points"].reshape(-1, groups)[r0:r1].astype(np.int64) if p["zero_points"]
             else np.full((r1 - r0, groups), 1 << (bits - 1), np.int64))
    diff = q - zeros[:, gi]
    raw = c["scales"].reshape(-1, groups)[r0:r1][:, gi]
    if p["scale_dtype"] == "f16":
        scale = raw.astype(np.float16).astype(np.float32)
    elif p["scale_dtype"] == "bf16":
        scale = _f32(raw.astype(np.uint32) << 16)
    else:
        scale = raw.astype(np.float32)
    vals = scale * diff.astype(np.float32)  # exact for f16 / bf16 scales, one rounding for f32
    if "post_factor" in p:  # LLM.int8's 1/127: a second FP32 multiply
        vals = vals * np.float32(p["post_factor"])
    if p["scale_dtype"] == "f16":
        vals = vals.astype(np.float16).astype(np.float32)
    elif p["scale_dtype"] == "bf16":
        vals = _f32(to_bf16(vals).astype(np.uint32) << 16)
    if not p["act_order"]:
        return vals
    perm = c["permutation"].reshape(-1, k)
    out = np.empty_like(vals)
    for m in range(r0 // n, (r1 - 1) // n + 1):
        a, b = max(r0, m * n) - r0, min(r1, (m + 1) * n) - r0
        pm = perm[m].astype(np.int64)
        if pm.max(initial=0) >= k or len(np.unique(pm)) != k:
            raise IrisError(f"tensor '{t.name}': permutation of matrix {m} is not one")
        out[a:b][:, pm] = vals[a:b]
    return out


def _nvfp4_rows(t, c, r0: int, r1: int, k: int) -> np.ndarray:
    """nvfp4 (section 4.6): s = e4m3(scale) * t (or / t), then e2m1(code) * s, each one FP32
    rounding; code 8 is +0 unless negative_zero."""
    p = t._typed
    rows = untile(t, c["codes"], r0, r1)
    nib = np.empty((rows.shape[0], rows.shape[1] * 2), dtype=np.uint8)
    nib[:, 0::2] = rows & 15  # element 2j in the LOW nibble
    nib[:, 1::2] = rows >> 4
    table = e2m1_table()
    if not p["negative_zero"]:
        table[8] = np.float32(0.0)
    vals = table[nib[:, :k]]
    n = t.shape[-2]
    ts = c["tensor_scale"].reshape(-1).astype(np.float32)[np.arange(r0, r1) // n][:, None]
    e = e4m3_table()[c["scales"].reshape(-1, c["scales"].shape[-1])[r0:r1]]
    s = (e / ts if p["divides"] else e * ts).astype(np.float32)
    return vals * np.repeat(s, 16, axis=1)[:, :k]


def decode_rows_f32(t, r0: int, r1: int) -> np.ndarray:
    """Rows [r0, r1) of the tensor viewed as [rows, K] (rows_of), as FP32 [r1 - r0, K], each
    value one FP32 operation per section 4; only what those rows need is read."""
    k = rows_of(t)[1]
    if r1 <= r0:
        return np.zeros((0, k), dtype=np.float32)
    c = t.components
    with np.errstate(all="ignore"):
        if t.format == "mxfp4":
            rows = untile(t, c["codes"], r0, r1)
            nib = np.empty((rows.shape[0], rows.shape[1] * 2), dtype=np.uint8)
            nib[:, 0::2] = rows & 15  # element 2j in the LOW nibble
            nib[:, 1::2] = rows >> 4
            vals = e2m1_table()[nib[:, :k]]
            scale = e8m0_table()[c["scales"].reshape(-1, c["scales"].shape[-1])[r0:r1]]
            out = vals * np.repeat(scale, 32, axis=1)[:, :k]
        elif t.format in ("nf4", "bnb_fp4"):
            out = _bnb_rows(t, c, r0 * k, r1 * k)
        elif t.format == "fp8_e4m3":
            q = e4m3_table()[untile(t, c["codes"], r0, r1)[:, :k]]
            out = q * _fp8_scales(t, c["scales"], r0, r1)
        elif t.format == "int_group":
            out = _int_group_rows(t, c, r0, r1)
        elif t.format == "nvfp4":
            out = _nvfp4_rows(t, c, r0, r1, k)
        else:
            raise IrisError(f"tensor '{t.name}': {t.format} is not a quantized format")
    return _canonical(np.ascontiguousarray(out, dtype=np.float32)).reshape(r1 - r0, k)


def decode_f32(t) -> np.ndarray:
    """The tensor's FP32 values in its logical shape (each one FP32 operation per section 4)."""
    return decode_rows_f32(t, 0, rows_of(t)[0]).reshape(t.shape)


def to_bf16(x: np.ndarray) -> np.ndarray:
    """FP32 -> BF16 bits, nearest even; NaN keeps its sign and becomes quiet."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    nan = (u & 0x7FFFFFFF) > 0x7F800000
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    r[nan] = ((u[nan] >> 16) | 0x40).astype(np.uint16)
    return r


def to_f16(x: np.ndarray) -> np.ndarray:
    """FP32 -> F16, nearest even (numpy's conversion); NaN as sign | 0x7E00 | top payload bits."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    with np.errstate(all="ignore"):
        out = x.astype(np.float16)
    u = x.view(np.uint32)
    nan = (u & 0x7FFFFFFF) > 0x7F800000
    if nan.any():
        h = out.view(np.uint16)
        h[nan] = (((u[nan] >> 16) & 0x8000) | 0x7E00 | ((u[nan] & 0x7FFFFFFF) >> 13 & 0x3FF)).astype(np.uint16)
    return out


def _widen(t, d: np.ndarray) -> np.ndarray:
    """Values `d` of unquantized tensor t as FP32 (exact for bf16 and f16)."""
    if t.dtype == "bf16":
        return _f32(d.astype(np.uint32) << 16)
    with np.errstate(all="ignore"):
        return d.astype(np.float32)


def dequantize_rows(t, dtype: str, r0: int, r1: int) -> np.ndarray:
    """Rows [r0, r1) of the tensor viewed as [rows, K] (rows_of) as `dtype` ("float32",
    "float16" or "bfloat16", BF16 as uint16 bits): [r1 - r0, K]."""
    want = {"float32": "f32", "float16": "f16", "bfloat16": "bf16"}[dtype]
    rows, k = rows_of(t)
    if not t.quantized:
        if t.dtype not in ("bf16", "f16", "f32", "f64"):
            raise IrisError(f"tensor '{t.name}': {t.dtype} is not a float type to convert")
        d = t.components["data"].reshape(rows, k)[r0:r1]
        if t.dtype == want:
            return np.array(d)  # bit for bit, NaN payloads included
        x = _widen(t, d)
    else:
        x = decode_rows_f32(t, r0, r1)
    if want == "f32":
        return x
    return to_bf16(x) if want == "bf16" else to_f16(x)


def dequantize(t, dtype: str) -> np.ndarray:
    """The whole tensor as `dtype`, in its shape."""
    return dequantize_rows(t, dtype, 0, rows_of(t)[0]).reshape(t.shape)
