"""Archives written here, without the iris binary: a manifest and components laid out as
FORMAT.md says, zero-filled (sparse files, so a many-tensor archive costs little disk) unless
given their bytes. Used by the manifest-scale test, the slice tests (layouts `iris convert`
does not write from the fixtures) and by python/bench_open.py."""

from __future__ import annotations

import json
import struct

import numpy as np
import xxhash

ALIGNMENT = 4096


def _align(n: int) -> int:
    return (n + ALIGNMENT - 1) // ALIGNMENT * ALIGNMENT


def mxfp4_expert_tensor(name: str, n: int = 64, k: int = 256) -> dict:
    """The descriptor of an [n, k] MXFP4 weight, tiled 16 x 256 as `iris convert` writes one,
    components without offsets (write_archive places them)."""
    padded_n, padded_k = _align_to(n, 16), _align_to(k, 256)
    codes_shape, scales_shape = [padded_n, padded_k // 2], [n, k // 32]
    return {
        "name": name, "shape": [n, k], "dtype": "bf16", "format": "mxfp4",
        "params": {"block_size": 32, "element": "e2m1", "nibble_order": "low_first", "scale_encoding": "e8m0"},
        "layout": {"kind": "tiled", "tile_n": 16, "tile_k": 256, "padded_n": padded_n, "padded_k": padded_k},
        "components": [
            {"role": "codes", "dtype": "u8", "shape": codes_shape, "bytes": codes_shape[0] * codes_shape[1]},
            {"role": "scales", "dtype": "u8", "shape": scales_shape, "bytes": scales_shape[0] * scales_shape[1]},
        ],
        "source": {"tensors": [
            {"role": "codes", "name": name + "_blocks", "dtype": "U8", "shape": [n, k // 32, 16], "file": "model.safetensors"},
            {"role": "scales", "name": name + "_scales", "dtype": "U8", "shape": [n, k // 32], "file": "model.safetensors"},
        ]},
    }


def _align_to(n: int, m: int) -> int:
    return (n + m - 1) // m * m


def write_archive(path, tensors: list, model_type: str = "qwen3_moe") -> None:
    """Writes an archive of `tensors` (descriptors whose components lack offsets and
    checksums): every component at the next 4096-aligned offset, holding the bytes of its
    "data" key (taken out of the manifest) or zeros."""
    zero_hash = {}
    offset = 0
    written = []
    for t in tensors:
        for c in t["components"]:
            c["offset"] = offset
            data = c.pop("data", None)
            if data is not None:
                assert len(data) == c["bytes"], (t["name"], c["role"])
                written.append((offset, data))
                c["xxh3"] = "%016x" % xxhash.xxh3_64_intdigest(data)
            else:
                if c["bytes"] not in zero_hash:
                    zero_hash[c["bytes"]] = "%016x" % xxhash.xxh3_64_intdigest(bytes(c["bytes"]))
                c["xxh3"] = zero_hash[c["bytes"]]
            offset = _align(offset + c["bytes"])
    manifest = {"format": "iris", "format_version": [2, 0], "alignment": ALIGNMENT, "model_type": model_type,
                "tool": {"name": "synthetic_archive.py"}, "tensors": tensors, "files": []}
    raw = json.dumps(manifest, separators=(",", ":")).encode()
    data_offset = _align(64 + len(raw))
    preamble = bytearray(64)
    preamble[:8] = b"IRISMDL2"
    struct.pack_into("<HHIQQQQQ", preamble, 8, 2, 0, 64, 64, len(raw), data_offset, offset, xxhash.xxh3_64_intdigest(raw))
    struct.pack_into("<Q", preamble, 56, xxhash.xxh3_64_intdigest(bytes(preamble[:56])))
    with open(path, "wb") as f:
        f.write(preamble)
        f.write(raw)
        f.truncate(data_offset + offset)  # the zero padding and zero data, as holes
        for at, data in written:
            f.seek(data_offset + at)
            f.write(data)


def write_expert_archive(path, n_tensors: int) -> None:
    """An MoE-shaped archive of n_tensors small MXFP4 expert weights (36,096 is
    Qwen3-235B-A22B's count: 94 layers x 128 experts x 3 projections)."""
    per_layer = 128 * 3
    tensors = []
    for i in range(n_tensors):
        layer, rest = divmod(i, per_layer)
        expert, proj = divmod(rest, 3)
        name = f"model.layers.{layer}.mlp.experts.{expert}.{('gate_proj', 'up_proj', 'down_proj')[proj]}.weight"
        tensors.append(mxfp4_expert_tensor(name))
    write_archive(path, tensors)


# -- quantized tensors with random bytes, in layouts and granularities the fixtures lack
# (flat bitsandbytes codes, FP8 group / tensor scales, stacks whose N is not a multiple of
# tile_n), for the decoders to be checked against each other (tests/test_slices.py).

def _tiled_codes(rng, batch: int, n: int, row_bytes: int, padded_n: int, padded_row: int, tn: int, tile_row: int,
                 pad: int) -> bytes:
    """Random codes of [batch, n, row_bytes], padded with `pad` to [padded_n, padded_row] and
    laid out in tiles of tn rows x tile_row bytes (FORMAT.md section 5), written here from
    that section."""
    rows = np.full((batch, padded_n, padded_row), pad, dtype=np.uint8)
    rows[:, :n, :row_bytes] = rng.integers(0, 256, (batch, n, row_bytes), dtype=np.uint8)
    tiles = rows.reshape(batch, padded_n // tn, tn, padded_row // tile_row, tile_row).transpose(0, 1, 3, 2, 4)
    return np.ascontiguousarray(tiles).tobytes()


def _comp(role: str, dtype: str, shape: list, data: bytes) -> dict:
    return {"role": role, "dtype": dtype, "shape": shape, "bytes": len(data), "data": data}


def _f32(rng, count: int, low: float = 0.01, high: float = 2.0) -> bytes:
    return rng.uniform(low, high, count).astype("<f4").tobytes()


def _bnb(rng, name: str, fmt: str, shape: list, block_size: int, nested_block_size: int = 0, tile=None) -> dict:
    """An nf4 / bnb_fp4 tensor: flat codes (tile None) or tiled [..., N, K] codes; double
    quantization when nested_block_size is given."""
    n_el = int(np.prod(shape))
    n_abs = -(-n_el // block_size)
    if tile is None:
        codes = _comp("codes", "u8", [-(-n_el // 2)], rng.integers(0, 256, -(-n_el // 2), dtype=np.uint8).tobytes())
        layout = {"kind": "flat"}
    else:
        tn, tk = tile
        batch, n, k = int(np.prod(shape[:-2])), shape[-2], shape[-1]
        pn, pk = _align_to(n, tn), _align_to(k, tk)
        data = _tiled_codes(rng, batch, n, k // 2, pn, pk // 2, tn, tk // 2, 0x77 if fmt == "nf4" else 0)
        codes = _comp("codes", "u8", shape[:-2] + [pn, pk // 2], data)
        layout = {"kind": "tiled", "tile_n": tn, "tile_k": tk, "padded_n": pn, "padded_k": pk}
    table = np.sort(rng.uniform(-1, 1, 16)).astype("<f4").tobytes()
    params = {"block_size": block_size, "nibble_order": "high_first", "double_quant": bool(nested_block_size),
              "quant_state_bytes": 0}
    if nested_block_size:
        n_nested = -(-n_abs // nested_block_size)
        params.update(nested_block_size=nested_block_size, nested_offset=0.0625)
        comps = [codes, _comp("absmax", "u8", [n_abs], rng.integers(0, 256, n_abs, dtype=np.uint8).tobytes()),
                 _comp("nested_absmax", "f32", [n_nested], _f32(rng, n_nested)), _comp("code_table", "f32", [16], table),
                 _comp("nested_code_table", "f32", [256], _f32(rng, 256, -1, 1))]
    else:
        comps = [codes, _comp("absmax", "f32", [n_abs], _f32(rng, n_abs)), _comp("code_table", "f32", [16], table)]
    return {"name": name, "shape": shape, "dtype": "bf16", "format": fmt, "params": params, "layout": layout,
            "components": comps}


def _fp8(rng, name: str, shape: list, tile: tuple, granularity: str, scale_dtype: str, **sizes) -> dict:
    batch, n, k = int(np.prod(shape[:-2])), shape[-2], shape[-1]
    tn, tk = tile
    pn, pk = _align_to(n, tn), _align_to(k, tk)
    codes = _comp("codes", "u8", shape[:-2] + [pn, pk], _tiled_codes(rng, batch, n, k, pn, pk, tn, tk, 0))
    scale_shape = {"tensor": [batch], "channel": [batch * n],
                   "block": [batch, -(-n // sizes.get("block_n", 1)), -(-k // sizes.get("block_k", 1))],
                   "group": shape[:-1] + [-(-k // sizes.get("group_size", 1))]}[granularity]
    count = int(np.prod(scale_shape))
    scales = rng.uniform(0.001, 0.1, count).astype({"f32": "<f4", "f16": "<f2", "bf16": "<f4"}[scale_dtype])
    if scale_dtype == "bf16":  # the top halves of FP32 values
        scales = (scales.view(np.uint32) >> 16).astype("<u2")
    params = {"scale_granularity": granularity, "scale_dtype": scale_dtype, "scale_shape": scale_shape,
              "scale_name": "weight_scale", **sizes}
    return {"name": name, "shape": shape, "dtype": "bf16", "format": "fp8_e4m3", "params": params,
            "layout": {"kind": "tiled", "tile_n": tn, "tile_k": tk, "padded_n": pn, "padded_k": pk},
            "components": [codes, _comp("scales", scale_dtype, scale_shape, scales.tobytes())]}


def _mxfp4(rng, name: str, shape: list, tile: tuple) -> dict:
    batch, n, k = int(np.prod(shape[:-2])), shape[-2], shape[-1]
    tn, tk = tile
    stored_k, pn, pk = _align_to(k, 32), _align_to(n, tn), _align_to(k, tk)
    # Scale bytes near 127 (values near 1), and 0xFF (NaN) now and then.
    scale_bytes = rng.integers(120, 134, shape[:-1] + [stored_k // 32], dtype=np.uint8)
    scale_bytes.reshape(-1)[::17] = 0xFF
    return {"name": name, "shape": shape, "dtype": "bf16", "format": "mxfp4",
            "params": {"block_size": 32, "element": "e2m1", "nibble_order": "low_first", "scale_encoding": "e8m0"},
            "layout": {"kind": "tiled", "tile_n": tn, "tile_k": tk, "padded_n": pn, "padded_k": pk},
            "components": [_comp("codes", "u8", shape[:-2] + [pn, pk // 2],
                                 _tiled_codes(rng, batch, n, stored_k // 2, pn, pk // 2, tn, tk // 2, 0)),
                           _comp("scales", "u8", list(scale_bytes.shape), scale_bytes.tobytes())]}


def wide_tensors(seed: int = 26) -> list:
    """Quantized weights whose tile stripes are whole pages (K = 4096: an MXFP4 or NF4 stripe
    of 16 rows is 32 KiB, an FP8 one 64 KiB), for a test to take away every page but a
    stripe's: [256, 4096] in each format, and a [4, 64, 4096] MXFP4 stack."""
    rng = np.random.default_rng(seed)
    return [_mxfp4(rng, "mxfp4", [256, 4096], (16, 256)), _mxfp4(rng, "mxfp4.stack", [4, 64, 4096], (16, 256)),
            _bnb(rng, "nf4", "nf4", [256, 4096], 64, nested_block_size=256, tile=(16, 256)),
            _fp8(rng, "fp8", [256, 4096], (16, 256), "block", "f32", block_n=128, block_k=128)]


def random_quantized_tensors(seed: int = 26) -> list:
    """Descriptors (with their bytes) of quantized tensors of every layout and granularity,
    with shapes whose rows cross bytes, blocks, tile stripes and matrices of a stack."""
    rng = np.random.default_rng(seed)
    return [
        _bnb(rng, "nf4.flat", "nf4", [3, 33], 64),                       # rows start mid-byte, blocks cross rows
        _bnb(rng, "nf4.flat.dq", "nf4", [5, 40], 32, nested_block_size=4),
        _bnb(rng, "fp4.flat.vector", "bnb_fp4", [77], 64),
        _bnb(rng, "nf4.tiled.dq.stack", "nf4", [2, 24, 128], 64, nested_block_size=2, tile=(16, 128)),
        _fp8(rng, "fp8.group.stack", [2, 20, 48], (8, 16), "group", "f32", group_size=32),
        _fp8(rng, "fp8.tensor.stack", [3, 10, 16], (4, 16), "tensor", "bf16"),
        _fp8(rng, "fp8.block", [37, 50], (16, 64), "block", "f16", block_n=16, block_k=32),
        _fp8(rng, "fp8.channel.stack", [2, 2, 9, 32], (4, 32), "channel", "f32"),
        _mxfp4(rng, "mxfp4.stack", [3, 20, 70], (8, 64)),
    ]
