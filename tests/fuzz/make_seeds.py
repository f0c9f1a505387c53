#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets (tests/fuzz/corpus/*), small inputs of every
shape the readers know: plain safetensors, MXFP4 blocks + scales, FP8 + scales, bitsandbytes
NF4 companions; config.json / index pairs; and .iris archives converted from those snapshots
with the iris binary given as the first argument. Standard library only."""
import json
import os
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def st(tensors, meta=None):
    hdr, blobs, off = {}, [], 0
    for name, dt, shape, data in tensors:
        hdr[name] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + len(data)]}
        off += len(data)
        blobs.append(data)
    if meta:
        hdr["__metadata__"] = meta
    h = json.dumps(hdr).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + b"".join(blobs)


def nf4_tensors():
    qs = json.dumps({"quant_type": "nf4", "blocksize": 64, "dtype": "bfloat16", "shape": [8, 16],
                     "nested_blocksize": 256, "nested_offset": 0.0732421875}).encode()
    return [("p.weight", "U8", [64, 1], bytes(range(64))),
            ("p.weight.absmax", "U8", [2], b"\x10\x20"),
            ("p.weight.quant_map", "F32", [16], struct.pack("<16f", *[i / 8 - 1 for i in range(16)])),
            ("p.weight.nested_absmax", "F32", [1], struct.pack("<f", 0.5)),
            ("p.weight.nested_quant_map", "F32", [256], struct.pack("<256f", *[i / 128 - 1 for i in range(256)])),
            ("p.weight.quant_state.bitsandbytes__nf4", "U8", [len(qs)], qs)]


SNAPSHOTS = {
    "bf16": [("model.layers.0.mlp.down_proj.weight", "BF16", [4, 8], bytes(64)), ("model.norm.weight", "BF16", [8], bytes(16))],
    "mxfp4": [("model.layers.0.mlp.experts.gate_up_proj_blocks", "U8", [2, 4, 1, 16], bytes(range(128))),
              ("model.layers.0.mlp.experts.gate_up_proj_scales", "U8", [2, 4, 1], bytes([127] * 8))],
    "fp8": [("m.weight", "F8_E4M3", [4, 8], bytes(range(32))), ("m.weight_scale_inv", "F32", [1, 1], struct.pack("<f", 0.5))],
    "fp8_channel": [("m.weight", "F8_E4M3", [4, 8], bytes(range(32))), ("m.weight_scale", "F32", [4, 1], struct.pack("<4f", 1, 2, 3, 4))],
    "nf4": nf4_tensors(),
}
CONFIG_BYTE = {"bf16": 1, "mxfp4": 5, "fp8": 2, "fp8_channel": 1, "nf4": 4}


def write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def v1_archive(tensors):
    """A seed-engine .iris v1 file (FORMATS.md section 5): 216-byte entries, absolute offsets,
    the header padded to 4096, blobs 256-aligned."""
    codes = {"bf16": 0, "f32": 1, "u8": 2, "i32": 3}
    table, blobs, pos = b"", b"", 4096
    for name, dt, shape, data in tensors:
        pos += -pos % 256
        table += name.encode().ljust(128, b"\0") + struct.pack("<QQII", pos, len(data), codes[dt], len(shape))
        table += struct.pack("<8Q", *(list(shape) + [0] * (8 - len(shape))))
        blobs += b"\0" * (pos - 4096 - len(blobs)) + data
        pos += len(data)
    head = b"IRISMDL1" + struct.pack("<II", 1, len(tensors)) + table
    return head + b"\0" * (4096 - len(head)) + blobs


def main():
    write(f"{HERE}/corpus/archive/v1", v1_archive([("embed", "bf16", [4, 8], bytes(range(64))),
                                                   ("L0.gate_up_blocks", "u8", [2, 3, 1, 16], bytes(96)),
                                                   ("L0.sinks", "f32", [2], struct.pack("<2f", 1.0, -2.0))]))
    iris = sys.argv[1] if len(sys.argv) > 1 else None
    for name, tensors in SNAPSHOTS.items():
        write(f"{HERE}/corpus/snapshot/{name}", bytes([CONFIG_BYTE[name]]) + st(tensors, {"format": "pt"}))
    write(f"{HERE}/corpus/config/llama", json.dumps({"model_type": "llama", "quantization_config": {
        "quant_method": "fp8", "weight_block_size": [128, 128]}}).encode() + b"\0" +
        json.dumps({"metadata": {"total_size": 8}, "weight_map": {"a": "s1.safetensors"}}).encode())
    write(f"{HERE}/corpus/config/bnb", json.dumps({"model_type": "llama", "torch_dtype": "bfloat16", "quantization_config": {
        "quant_method": "bitsandbytes", "load_in_4bit": True, "llm_int8_skip_modules": ["lm_head"]}}).encode())
    if iris:
        for name, tensors in SNAPSHOTS.items():
            with tempfile.TemporaryDirectory() as d:
                write(f"{d}/snap/model.safetensors", st(tensors))
                if name == "mxfp4":
                    write(f"{d}/snap/config.json", b'{"model_type": "gpt_oss"}')
                subprocess.run([iris, "convert", f"{d}/snap", "-o", f"{d}/a.iris", "-q"], check=True)
                with open(f"{d}/a.iris", "rb") as f:
                    write(f"{HERE}/corpus/archive/{name}", f.read())
                if name == "bf16":
                    subprocess.run([iris, "convert", f"{d}/snap", "-o", f"{d}/q.iris", "--quant", "nf4", "-q"], check=True)
                    with open(f"{d}/q.iris", "rb") as f:
                        write(f"{HERE}/corpus/archive/bf16-to-nf4", f.read())


if __name__ == "__main__":
    main()
