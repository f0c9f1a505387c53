#!/usr/bin/env python3
"""Writes a single-file safetensors snapshot of many tiny expert tensors (issue 24 items 5, 10):
the input of bench/manifest_scale.sh, where the header, not the data, is what costs.

    make_manifest_snapshot.py OUT_DIR TENSORS [ROWS COLS]

Tensors are named like an MoE checkpoint's experts, `layers.L.experts.E.wP.weight` (P in 1, 2,
3; 128 experts a layer, as Qwen3-235B-A22B has, so 36,096 tensors are its 94 layers), BF16 of
shape [ROWS, COLS] (default [1, 1]: one element, so 10^6 tensors give a ~90 MB header and 2 MB
of data). The names are kept short because the reference reader caps a header at 10^8 bytes:
with the `model.layers.L.mlp.experts.E.gate_proj.weight` spelling 10^6 entries would not fit.
The data is a fixed non-zero pattern; only its size matters here.
"""
import json
import os
import struct
import sys


def main() -> int:
    if len(sys.argv) not in (3, 5):
        print(__doc__, file=sys.stderr)
        return 2
    out, n = sys.argv[1], int(sys.argv[2])
    rows, cols = (int(sys.argv[3]), int(sys.argv[4])) if len(sys.argv) == 5 else (1, 1)
    nbytes = rows * cols * 2
    os.makedirs(out, exist_ok=True)
    # The header text is written by hand (json.dumps of a 10^6-key dict takes seconds more and
    # the format is fixed): keys and shapes only, no spaces, as the reference writer does.
    parts = []
    for i in range(n):
        layer, rest = divmod(i, 128 * 3)
        expert, proj = divmod(rest, 3)
        b = i * nbytes
        parts.append(f'"layers.{layer}.experts.{expert}.w{proj + 1}.weight":'
                     f'{{"dtype":"BF16","shape":[{rows},{cols}],"data_offsets":[{b},{b + nbytes}]}}')
    header = ("{" + ",".join(parts) + "}").encode()
    header += b" " * (-len(header) % 8)  # the reference writer pads to 8 bytes with spaces
    pattern = bytes([0x80, 0x3F]) * (nbytes // 2)  # 1.0 in BF16
    with open(os.path.join(out, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(header)))
        f.write(header)
        for _ in range(n):
            f.write(pattern)
    config = {"model_type": "qwen3_moe", "architectures": ["Qwen3MoeForCausalLM"], "dtype": "bfloat16",
              "num_hidden_layers": (n + 383) // 384, "num_experts": 128}
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    print(f"{out}: {n} tensors, header {len(header)} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
