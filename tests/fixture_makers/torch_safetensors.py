"""The fixture makers' safetensors writer for torch tensors (written here from the safetensors
format, so that the makers need no safetensors package): tensors in name order, the header's
JSON compact and padded to 8 bytes, as trim_fixture.py writes it too."""

import json
import struct


def write_safetensors(path, tensors, metadata=None):
    import torch

    names = {torch.bfloat16: "BF16", torch.float16: "F16", torch.float32: "F32", torch.uint8: "U8", torch.int8: "I8",
             torch.float8_e4m3fn: "F8_E4M3"}
    header, blobs, offset = {}, [], 0
    if metadata:
        header["__metadata__"] = metadata
    for name in sorted(tensors):
        t = tensors[name].detach().contiguous().cpu()
        raw = t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""
        header[name] = {"dtype": names[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))
