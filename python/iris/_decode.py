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


def untile(t, codes: np.ndarray) -> np.ndarray:
    """Tiled codes (section 5) -> row-major [batch * n, stored row bytes]."""
    g = t._geometry
    bits, tn, tk = g["bits"], g["tile_n"], g["tile_k"]
    row_bytes, tile_row = g["padded_k"] * bits // 8, tk * bits // 8
    c = codes.reshape(g["batch"], g["padded_n"] // tn, g["padded_k"] // tk, tn, tile_row)
    rows = c.transpose(0, 1, 3, 2, 4).reshape(g["batch"], g["padded_n"], row_bytes)
    return np.ascontiguousarray(rows[:, : g["n"], : g["stored_k"] * bits // 8]).reshape(g["batch"] * g["n"], -1)


def _canonical(x: np.ndarray) -> np.ndarray:
    nan = np.isnan(x)
    if nan.any():
        x = x.copy()
        x.view(np.uint32)[nan] = CANONICAL_NAN
    return x


def decode_f32(t) -> np.ndarray:
    """The tensor's FP32 values in its logical shape (each one FP32 operation per section 4)."""
    c = t.components
    shape = t.shape
    n_el = int(np.prod(shape, dtype=np.uint64)) if shape else 1
    with np.errstate(all="ignore"):
        if t.format == "mxfp4":
            k = shape[-1]
            rows = untile(t, c["codes"])
            nib = np.empty((rows.shape[0], rows.shape[1] * 2), dtype=np.uint8)
            nib[:, 0::2] = rows & 15  # element 2j in the LOW nibble
            nib[:, 1::2] = rows >> 4
            vals = e2m1_table()[nib[:, :k]]
            scale = e8m0_table()[c["scales"].reshape(-1, c["scales"].shape[-1])]
            out = vals * np.repeat(scale, 32, axis=1)[:, :k]
        elif t.format in ("nf4", "bnb_fp4"):
            p = t._typed
            packed = untile(t, c["codes"]).reshape(-1) if t.layout["kind"] == "tiled" else np.asarray(c["codes"])
            nib = np.empty(packed.size * 2, dtype=np.uint8)
            nib[0::2] = packed >> 4  # element 2j in the HIGH nibble
            nib[1::2] = packed & 15
            nib = nib[:n_el]
            if p["double_quant"]:
                nested = c["nested_absmax"][np.arange(c["absmax"].size) // p["nested_block_size"]]
                absmax = c["nested_code_table"][c["absmax"]] * nested  # two separately rounded FP32 steps
                absmax = absmax + np.float32(p["nested_offset"])
            else:
                absmax = c["absmax"]
            out = c["code_table"][nib] * absmax[np.arange(n_el) // p["block_size"]]
        elif t.format == "fp8_e4m3":
            p = t._typed
            g = t._geometry
            b, n, k = g["batch"], g["n"], g["k"]
            q = e4m3_table()[untile(t, c["codes"])[:, :k]].reshape(b, n, k)
            s = c["scales"]
            if p["scale_dtype"] == "bf16":
                s = _f32(s.astype(np.uint32) << 16)
            s = s.astype(np.float32).reshape(-1)
            gran = p["granularity"]
            if gran == "tensor":
                scale = s.reshape(b, 1, 1)
            elif gran == "channel":
                scale = s.reshape(b, n, 1)
            elif gran == "block":
                grid = s.reshape(b, -(-n // p["block_n"]), -(-k // p["block_k"]))
                scale = grid[:, np.arange(n) // p["block_n"]][:, :, np.arange(k) // p["block_k"]]
            else:
                grid = s.reshape(b, n, -(-k // p["group_size"]))
                scale = grid[:, :, np.arange(k) // p["group_size"]]
            out = q * scale
        else:
            raise IrisError(f"tensor '{t.name}': {t.format} is not a quantized format")
    return _canonical(np.ascontiguousarray(out, dtype=np.float32)).reshape(shape)


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


def _widen(t) -> np.ndarray:
    d = t.components["data"]
    if t.dtype == "bf16":
        return _f32(d.astype(np.uint32) << 16)
    if t.dtype in ("f16", "f32", "f64"):
        with np.errstate(all="ignore"):
            return d.astype(np.float32)
    raise IrisError(f"tensor '{t.name}': {t.dtype} is not a float type to convert")


def dequantize(t, dtype: str) -> np.ndarray:
    want = {"float32": "f32", "float16": "f16", "bfloat16": "bf16"}[dtype]
    if not t.quantized:
        if t.dtype == want:
            return np.array(t.components["data"])  # bit for bit, NaN payloads included
        x = _widen(t)
    else:
        x = decode_f32(t)
    if want == "f32":
        return x
    return to_bf16(x) if want == "bf16" else to_f16(x)
