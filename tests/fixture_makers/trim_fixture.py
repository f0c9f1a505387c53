"""Cuts a fixture snapshot written by a producing tool down to its first decoder layer, so that
the repository (and every device run, which carries the tree) stays small: the kept tensors'
bytes, dtypes and shapes are the tool's own, in one model.safetensors; config.json and the
tool's other JSON files are kept as written; the sharded index is dropped with the shards.
A reference file of dequantized weights keeps the entries of the kept weights.

  python3 tests/fixture_makers/trim_fixture.py FOLDER [REFS.safetensors ...]
"""

import json
import struct
import sys
from pathlib import Path

KEEP = "model.layers.0."


def read(path):
    data = path.read_bytes()
    (n,) = struct.unpack_from("<Q", data, 0)
    header = json.loads(data[8:8 + n])
    meta = header.pop("__metadata__", None)
    return header, meta, data[8 + n:]


def write(path, tensors, meta):
    header, blobs, offset = {}, [], 0
    if meta is not None:
        header["__metadata__"] = meta
    for name in sorted(tensors):
        h, raw = tensors[name]
        header[name] = {"dtype": h["dtype"], "shape": h["shape"], "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    path.write_bytes(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def kept(path):
    header, meta, data = read(path)
    out = {}
    for name, h in header.items():
        if name.startswith(KEEP):
            b, e = h["data_offsets"]
            out[name] = (h, data[b:e])
    return out, meta


def trim_folder(folder):
    shards = sorted(folder.glob("*.safetensors"))
    tensors, meta = {}, None
    for shard in shards:
        t, m = kept(shard)
        tensors.update(t)
        meta = meta or m
    for shard in shards:
        shard.unlink()
    index = folder / "model.safetensors.index.json"
    if index.exists():
        index.unlink()
    write(folder / "model.safetensors", tensors, meta)


if __name__ == "__main__":
    trim_folder(Path(sys.argv[1]))
    for ref in sys.argv[2:]:
        t, m = kept(Path(ref))
        write(Path(ref), t, m)
