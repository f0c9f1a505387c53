"""Archives written here, without the iris binary: a manifest and zero-filled components laid
out as FORMAT.md says (sparse files, so a many-tensor archive costs little disk). Used by the
manifest-scale test and by python/bench_open.py."""

from __future__ import annotations

import json
import struct

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
    checksums) with zero-filled data: every component at the next 4096-aligned offset."""
    zero_hash = {}
    offset = 0
    for t in tensors:
        for c in t["components"]:
            c["offset"] = offset
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
