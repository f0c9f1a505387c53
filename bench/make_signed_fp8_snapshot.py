"""Writes an FP8-block snapshot whose weight_scale_inv blocks are of random sign and magnitude,
some zero (what transformers' FineGrained FP8 quantizer can write): a 2-layer Llama-shaped set
of projections, for `iris convert` + `iris verify --device cuda` on the GPU machine (issue 24).
Usage: python3 bench/make_signed_fp8_snapshot.py OUT_DIR [SEED]"""
import json
import struct
import sys
from pathlib import Path

import numpy as np


def main() -> None:
    out = Path(sys.argv[1])
    rng = np.random.default_rng(int(sys.argv[2]) if len(sys.argv) > 2 else 0)
    out.mkdir(parents=True, exist_ok=True)
    header, blobs, offset = {}, [], 0

    def add(name: str, dtype: str, array: np.ndarray) -> None:
        nonlocal offset
        data = array.tobytes()
        header[name] = {"dtype": dtype, "shape": list(array.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)

    for layer in range(2):
        for proj, (n, k) in {"q_proj": (512, 512), "o_proj": (512, 512), "gate_proj": (1408, 512), "down_proj": (512, 1408)}.items():
            codes = rng.integers(0, 256, size=(n, k), dtype=np.uint8)
            codes[(codes & 0x7F) == 0x7F] &= 0xFE  # no NaN codes
            grid = (-(-n // 128), -(-k // 128))
            scales = (rng.choice([-1.0, 1.0], size=grid) * 10.0 ** rng.uniform(-4, -1, size=grid)).astype(np.float32)
            scales.flat[rng.integers(0, scales.size)] = 0.0
            name = f"model.layers.{layer}.self_attn.{proj}" if proj.endswith(("q_proj", "o_proj")) else f"model.layers.{layer}.mlp.{proj}"
            add(f"{name}.weight", "F8_E4M3", codes)
            add(f"{name}.weight_scale_inv", "F32", scales)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(out / "model.safetensors", "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))
    config = {"model_type": "llama", "quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]}}
    (out / "config.json").write_text(json.dumps(config))


if __name__ == "__main__":
    main()
