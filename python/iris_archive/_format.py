"""The archive contract (formats/FORMAT.md) in Python: element types, each format's
parameters, and the components a descriptor implies. Written from FORMAT.md, not from the C++
sources, so the two readers check each other."""

from __future__ import annotations

import math
import struct

from ._errors import IrisError

# archive name -> (bits per element, numpy dtype string or None)
DTYPES = {
    "bool": (8, "u1"), "f4": (4, None), "f6_e2m3": (6, None), "f6_e3m2": (6, None),
    "u8": (8, "u1"), "i8": (8, "i1"), "f8_e5m2": (8, "u1"), "f8_e4m3": (8, "u1"),
    "f8_e8m0": (8, "u1"), "f8_e4m3fnuz": (8, "u1"), "f8_e5m2fnuz": (8, "u1"),
    "i16": (16, "<i2"), "u16": (16, "<u2"), "f16": (16, "<f2"), "bf16": (16, "<u2"),
    "i32": (32, "<i4"), "u32": (32, "<u4"), "f32": (32, "<f4"), "c64": (64, "<c8"),
    "f64": (64, "<f8"), "i64": (64, "<i8"), "u64": (64, "<u8"),
}

FORMATS = ("mxfp4", "nf4", "bnb_fp4", "fp8_e4m3", "int_group", "nvfp4")
CODE_BITS = {"mxfp4": 4, "nf4": 4, "bnb_fp4": 4, "fp8_e4m3": 8, "nvfp4": 4}  # int_group: its `bits` parameter
ROW_UNIT = {"mxfp4": 32, "nf4": 2, "bnb_fp4": 2, "fp8_e4m3": 1, "int_group": 8, "nvfp4": 16}
PAD_BYTE = {"mxfp4": 0x00, "nf4": 0x77, "bnb_fp4": 0x00, "fp8_e4m3": 0x00, "int_group": 0x00, "nvfp4": 0x00}
ALIGNMENT = 4096  # of the data section and of every component and embedded file in it
MAX_DIMS = 16
MAX_DIM = 1 << 48
MAX_NUMEL = 1 << 50

# key -> (type, required, fixed value)
PARAMS = {
    "mxfp4": {
        "block_size": ("uint", True, None), "element": ("str", True, "e2m1"),
        "scale_encoding": ("str", True, "e8m0"), "nibble_order": ("str", True, "low_first"),
        "scale_rule": ("str", False, None),
    },
    "nf4": {
        "block_size": ("uint", True, None), "nibble_order": ("str", True, "high_first"),
        "double_quant": ("bool", True, None), "quant_state_bytes": ("uint", True, None),
        "nested_block_size": ("uint", False, None), "nested_offset": ("number", False, None),
        "nested_offset_f32_bits": ("str", False, None),
    },
    "fp8_e4m3": {
        "scale_granularity": ("str", True, None), "scale_dtype": ("str", True, None),
        "scale_shape": ("shape", True, None), "scale_name": ("str", True, None),
        "block_n": ("uint", False, None), "block_k": ("uint", False, None), "group_size": ("uint", False, None),
    },
    "nvfp4": {
        "block_size": ("uint", True, None), "element": ("str", True, "e2m1"),
        "scale_encoding": ("str", True, "e4m3"), "nibble_order": ("str", True, "low_first"),
        "tensor_scale": ("str", True, None), "negative_zero": ("bool", True, None),
        "tensor_scale_shape": ("shape", True, None), "scale_rule": ("str", False, None),
    },
    "int_group": {
        "bits": ("uint", True, None), "group_size": ("uint", True, None), "scale_dtype": ("str", True, None),
        "zero_points": ("bool", True, None), "act_order": ("bool", True, None),
        "post_factor": ("number", False, None),
    },
}
PARAMS["bnb_fp4"] = PARAMS["nf4"]


# Component roles (FORMAT.md section 4), as the manifest and the source record name them.
ROLES = ("data", "codes", "scales", "absmax", "nested_absmax", "code_table", "nested_code_table", "quant_state",
         "zero_points", "permutation", "tensor_scale")
# What a source record may name besides: a checkpoint tensor no component holds as it is.
SOURCE_ROLES = ROLES + ("companion",)

def is_uint(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def ceil_div(a: int, b: int) -> int:
    return (a + b - 1) // b


def round_up(a: int, b: int) -> int:
    return ceil_div(a, b) * b


def numel(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _type_ok(v, t) -> bool:
    if t == "uint":
        return is_uint(v)
    if t == "bool":
        return isinstance(v, bool)
    if t == "number":
        return isinstance(v, (int, float)) and not isinstance(v, bool)
    if t == "str":
        return isinstance(v, str)
    if t == "shape":
        return isinstance(v, list) and len(v) <= 8 and all(is_uint(d) and d < MAX_DIM for d in v)
    return False


def f32(x: float) -> float:
    """x rounded to float32, as a Python float."""
    return struct.unpack("<f", struct.pack("<f", x))[0]


def _finite_f32(ctx: str, key: str, v) -> float:
    """A JSON number as the FP32 value the decoders use; IrisError (not Python's OverflowError)
    when it is beyond FP32's range, as an integer of 400 digits, 1e308 or 1e999 (which Python's
    JSON parser reads as infinity) is."""
    try:
        x = f32(float(v))
        if math.isfinite(x):
            return x
    except OverflowError:
        pass
    shown = f"{v:.6g}" if isinstance(v, float) or abs(v) < 10 ** 20 else f"of {len(str(abs(v)))} digits"
    raise IrisError(f"{ctx}{key} {shown} is not a finite FP32 value")


def check_params(ctx: str, fmt: str, p) -> dict:
    """Validates the params of a quantized tensor; returns the typed values the decoders use."""
    if not isinstance(p, dict):
        raise IrisError(f"{ctx}format parameters are not an object")
    spec = PARAMS[fmt]
    for k, v in p.items():
        if k not in spec:
            raise IrisError(f"{ctx}unknown {fmt} format parameter '{k}'")
        t, _, fixed = spec[k]
        if not _type_ok(v, t):
            raise IrisError(f"{ctx}format parameter '{k}' is {v!r}, not of type {t}")
        if fixed is not None and v != fixed:
            raise IrisError(f"{ctx}format parameter '{k}' is {v!r}; {fmt} needs {fixed!r}")
    for k, (_, required, _) in spec.items():
        if required and k not in p:
            raise IrisError(f"{ctx}format parameter '{k}' is missing")

    def only_with(keys, present, why):
        for k in keys:
            if (k in p) != present:
                raise IrisError(f"{ctx}format parameter '{k}' is {'missing' if present else 'only valid'} {why}")

    if fmt == "mxfp4":
        if p["block_size"] != 32:
            raise IrisError(f"{ctx}mxfp4 block_size must be 32")
        if "scale_rule" in p and p["scale_rule"] not in ("ocp_floor", "search"):
            raise IrisError(f"{ctx}unknown scale_rule {p['scale_rule']!r}")
        return {"block_size": 32}
    if fmt in ("nf4", "bnb_fp4"):
        bs = p["block_size"]
        if bs < 32 or bs > 4096 or bs & (bs - 1):
            raise IrisError(f"{ctx}block_size {bs} is not a power of two in [32, 4096]")
        if p["quant_state_bytes"] > (1 << 20):
            raise IrisError(f"{ctx}quant_state_bytes too large")
        out = {"block_size": bs, "double_quant": p["double_quant"], "quant_state_bytes": p["quant_state_bytes"]}
        if not p["double_quant"]:
            only_with(("nested_block_size", "nested_offset", "nested_offset_f32_bits"), False, "with double_quant")
            return out
        only_with(("nested_block_size", "nested_offset"), True, "(required with double_quant)")
        nbs = p["nested_block_size"]
        if nbs == 0 or nbs > 65536:
            raise IrisError(f"{ctx}nested_block_size out of range")
        off = _finite_f32(ctx, "nested_offset", p["nested_offset"])
        if "nested_offset_f32_bits" in p:
            bits = "0x%08x" % struct.unpack("<I", struct.pack("<f", off))[0]
            if p["nested_offset_f32_bits"] != bits:
                raise IrisError(f"{ctx}nested_offset_f32_bits {p['nested_offset_f32_bits']} disagrees with nested_offset ({bits})")
        out.update(nested_block_size=nbs, nested_offset=off)
        return out
    if fmt == "nvfp4":
        if p["block_size"] != 16:
            raise IrisError(f"{ctx}nvfp4 block_size must be 16")
        if p["tensor_scale"] not in ("multiplies", "divides"):
            raise IrisError(f"{ctx}nvfp4 tensor_scale {p['tensor_scale']!r} is neither multiplies nor divides")
        if "scale_rule" in p and p["scale_rule"] != "modelopt":
            raise IrisError(f"{ctx}unknown nvfp4 scale_rule {p['scale_rule']!r}")
        return {"block_size": 16, "divides": p["tensor_scale"] == "divides", "negative_zero": p["negative_zero"],
                "tensor_scale_shape": list(p["tensor_scale_shape"])}
    if fmt == "int_group":
        if p["bits"] not in (2, 3, 4, 8):
            raise IrisError(f"{ctx}int_group bits {p['bits']} is not 2, 3, 4 or 8")
        if not p["group_size"] or p["group_size"] > (1 << 40):
            raise IrisError(f"{ctx}int_group group_size out of range")
        if p["scale_dtype"] not in ("f32", "bf16", "f16"):
            raise IrisError(f"{ctx}scale_dtype must be f32, bf16 or f16")
        if "post_factor" in p:  # an FP32 value exactly, finite and nonzero
            try:
                f = float(p["post_factor"])
            except OverflowError:
                f = math.inf
            if not math.isfinite(f) or f == 0.0 or f32(f) != f:
                raise IrisError(f"{ctx}int_group post_factor is not a finite, nonzero FP32 value")
        return dict(p)
    # fp8_e4m3
    g = p["scale_granularity"]
    if g not in ("tensor", "channel", "block", "group"):
        raise IrisError(f"{ctx}unknown scale_granularity {g!r}")
    only_with(("block_n", "block_k"), g == "block", "for block scales")
    only_with(("group_size",), g == "group", "for group scales")
    out = {"granularity": g, "scale_dtype": p["scale_dtype"], "scale_shape": list(p["scale_shape"])}
    if g == "block":
        bn, bk = p["block_n"], p["block_k"]
        if not bn or not bk or bn > 65536 or bk > 65536:
            raise IrisError(f"{ctx}FP8 block shape out of range")
        out.update(block_n=bn, block_k=bk)
    if g == "group":
        gs = p["group_size"]
        if not gs or gs > 65536:
            raise IrisError(f"{ctx}FP8 group_size out of range")
        out["group_size"] = gs
    if p["scale_dtype"] not in ("f32", "bf16", "f16"):
        raise IrisError(f"{ctx}scale_dtype must be f32, bf16 or f16")
    return out


def geometry(ctx: str, fmt: str, shape, layout, block_size: int, bits: int = None) -> dict:
    """The tiled geometry of FORMAT.md section 5 (validated)."""
    if len(shape) < 2:
        raise IrisError(f"{ctx}a {fmt} weight needs rank >= 2 for a tiled layout")
    tn, tk = layout["tile_n"], layout["tile_k"]
    if tn == 0 or tk == 0 or tn > 4096 or tk > 65536:
        raise IrisError(f"{ctx}tile {tn}x{tk} out of range")
    unit = ROW_UNIT[fmt]
    bits = bits if fmt == "int_group" else CODE_BITS[fmt]
    align = math.lcm(unit, block_size or 1)
    if bits == 4:
        align = math.lcm(align, 2)
    if tk % align:
        raise IrisError(f"{ctx}tile_k {tk} is not a multiple of {align}")
    batch = numel(shape[:-2])
    n, k = shape[-2], shape[-1]
    return {
        "batch": batch, "n": n, "k": k, "stored_k": round_up(k, unit), "tile_n": tn, "tile_k": tk,
        "padded_n": round_up(n, tn), "padded_k": round_up(k, tk), "bits": bits,
    }


def components(ctx: str, t: dict) -> list:
    """The (role, dtype, shape, bytes) every component of descriptor `t` must have, in order."""
    fmt, shape, layout = t["format"], t["shape"], t["layout"]
    n_el = numel(shape)
    if fmt == "raw":
        if layout["kind"] != "row_major":
            raise IrisError(f"{ctx}layout '{layout['kind']}' is not valid for this tensor")
        bits = DTYPES[t["dtype"]][0]
        if (n_el * bits) % 8:
            raise IrisError(f"{ctx}size does not fill whole bytes")
        return [("data", t["dtype"], list(shape), n_el * bits // 8)]
    p = t["typed_params"]
    kind = layout["kind"]
    if kind == "row_major":
        raise IrisError(f"{ctx}quantized codes need a tiled or flat layout")
    bits = p["bits"] if fmt == "int_group" else CODE_BITS[fmt]

    def codes():
        if kind == "flat":
            return ("codes", "u8", [ceil_div(n_el * bits, 8)], ceil_div(n_el * bits, 8))
        g = t["geometry"]
        cs = list(shape[:-2]) + [g["padded_n"], g["padded_k"] * bits // 8]
        return ("codes", "u8", cs, numel(cs))

    if fmt == "mxfp4":
        if kind != "tiled":
            raise IrisError(f"{ctx}layout 'flat' is not valid for this tensor")
        ss = list(shape[:-1]) + [ceil_div(shape[-1], 32)]
        return [codes(), ("scales", "u8", ss, numel(ss))]
    if fmt == "nvfp4":
        if kind != "tiled":
            raise IrisError(f"{ctx}layout 'flat' is not valid for this tensor")
        ss = list(shape[:-1]) + [ceil_div(shape[-1], 16)]
        ts = p["tensor_scale_shape"]
        if numel(ts) != numel(shape[:-2]):
            raise IrisError(f"{ctx}tensor_scale_shape {ts} does not hold one scale for each of its {numel(shape[:-2])} matrices")
        return [codes(), ("scales", "u8", ss, numel(ss)), ("tensor_scale", "f32", list(ts), 4 * numel(ts))]
    if fmt == "int_group":
        if kind != "tiled":
            raise IrisError(f"{ctx}layout 'flat' is not valid for this tensor")
        gs = list(shape[:-1]) + [ceil_div(shape[-1], p["group_size"])]
        out = [codes(), ("scales", p["scale_dtype"], gs, numel(gs) * DTYPES[p["scale_dtype"]][0] // 8)]
        if p["zero_points"]:
            out.append(("zero_points", "u8", gs, numel(gs)))
        if p["act_order"]:
            ps = list(shape[:-2]) + [shape[-1]]
            out.append(("permutation", "u32", ps, 4 * numel(ps)))
        return out
    if fmt in ("nf4", "bnb_fp4"):
        bs = p["block_size"]
        if kind == "tiled" and not (len(shape) >= 2 and shape[-1] % bs == 0):
            raise IrisError(f"{ctx}layout 'tiled' is not valid for this tensor")
        nabs = ceil_div(n_el, bs)
        out = [codes()]
        if p["double_quant"]:
            nn = ceil_div(nabs, p["nested_block_size"])
            out += [("absmax", "u8", [nabs], nabs), ("nested_absmax", "f32", [nn], 4 * nn),
                    ("code_table", "f32", [16], 64), ("nested_code_table", "f32", [256], 1024)]
        else:
            out += [("absmax", "f32", [nabs], 4 * nabs), ("code_table", "f32", [16], 64)]
        if p["quant_state_bytes"]:
            out.append(("quant_state", "u8", [p["quant_state_bytes"]], p["quant_state_bytes"]))
        return out
    # fp8
    if kind != "tiled":
        raise IrisError(f"{ctx}layout 'flat' is not valid for this tensor")
    g = t["geometry"]
    batch, n, k = g["batch"], g["n"], g["k"]
    gran = p["granularity"]
    expect = {"tensor": batch, "channel": batch * n}.get(gran)
    if gran == "block":
        expect = batch * ceil_div(n, p["block_n"]) * ceil_div(k, p["block_k"])
    elif gran == "group":
        expect = batch * n * ceil_div(k, p["group_size"])
    if numel(p["scale_shape"]) != expect:
        raise IrisError(f"{ctx}scale_shape holds {numel(p['scale_shape'])} scales but {gran} granularity needs {expect}")
    sb = DTYPES[p["scale_dtype"]][0] // 8
    return [codes(), ("scales", p["scale_dtype"], p["scale_shape"], expect * sb)]
