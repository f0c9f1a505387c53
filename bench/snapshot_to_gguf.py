#!/usr/bin/env python3
"""Write a BF16 GGUF of a Llama-shaped BF16 snapshot, for timing llama-quantize on the same
weights as `iris convert` (bench/peer_quantize.sh). Only what llama-quantize reads is written:
the architecture's hyperparameters and the tensors, their bytes copied as they are (no
tokenizer, and q/k rows are not permuted for GGUF's RoPE layout: the timing does not depend
on either). Standard library only; GGUF v3 as described in ggml's docs/gguf.md."""
import json
import pathlib
import struct
import sys

GGUF_TYPE_BF16 = 30
KV_UINT32, KV_FLOAT32, KV_STRING = 4, 6, 8
ALIGNMENT = 32


def gguf_name(hf):
    fixed = {"model.embed_tokens.weight": "token_embd.weight", "lm_head.weight": "output.weight",
             "model.norm.weight": "output_norm.weight"}
    if hf in fixed:
        return fixed[hf]
    parts = hf.split(".")  # model.layers.N.<module>.<proj>.weight
    if parts[:2] != ["model", "layers"]:
        raise SystemExit(f"snapshot_to_gguf: {hf}: not a Llama tensor name")
    rest = ".".join(parts[3:])
    table = {"input_layernorm.weight": "attn_norm.weight", "post_attention_layernorm.weight": "ffn_norm.weight",
             "self_attn.q_proj.weight": "attn_q.weight", "self_attn.k_proj.weight": "attn_k.weight",
             "self_attn.v_proj.weight": "attn_v.weight", "self_attn.o_proj.weight": "attn_output.weight",
             "mlp.gate_proj.weight": "ffn_gate.weight", "mlp.up_proj.weight": "ffn_up.weight",
             "mlp.down_proj.weight": "ffn_down.weight"}
    if rest not in table:
        raise SystemExit(f"snapshot_to_gguf: {hf}: no GGUF name for it")
    return f"blk.{parts[2]}.{table[rest]}"


def gguf_string(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def main(snapshot, out):
    snap = pathlib.Path(snapshot)
    config = json.loads((snap / "config.json").read_text())
    tensors = []  # (gguf name, shape, file, offset, nbytes)
    for shard in sorted(snap.glob("*.safetensors")):
        with open(shard, "rb") as f:
            n = struct.unpack("<Q", f.read(8))[0]
            header = json.loads(f.read(n))
        for name, info in header.items():
            if name == "__metadata__":
                continue
            if info["dtype"] != "BF16":
                raise SystemExit(f"snapshot_to_gguf: {shard}: {name}: {info['dtype']}, only BF16 is written")
            begin, end = info["data_offsets"]
            tensors.append((gguf_name(name), info["shape"], shard, 8 + n + begin, end - begin))
    heads = config.get("num_attention_heads", config["hidden_size"] // 128)
    kv = [("general.architecture", KV_STRING, "llama"),
          ("llama.context_length", KV_UINT32, config.get("max_position_embeddings", 4096)),
          ("llama.embedding_length", KV_UINT32, config["hidden_size"]),
          ("llama.block_count", KV_UINT32, config["num_hidden_layers"]),
          ("llama.feed_forward_length", KV_UINT32, config["intermediate_size"]),
          ("llama.attention.head_count", KV_UINT32, heads),
          ("llama.attention.head_count_kv", KV_UINT32, config.get("num_key_value_heads", heads // 4)),
          ("llama.rope.dimension_count", KV_UINT32, config["hidden_size"] // heads),
          ("llama.attention.layer_norm_rms_epsilon", KV_FLOAT32, config.get("rms_norm_eps", 1e-5)),
          ("general.file_type", KV_UINT32, 32)]  # LLAMA_FTYPE_MOSTLY_BF16
    head = bytearray(b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kv)))
    for key, kind, value in kv:
        head += gguf_string(key) + struct.pack("<I", kind)
        head += gguf_string(value) if kind == KV_STRING else struct.pack("<I" if kind == KV_UINT32 else "<f", value)
    offset = 0
    for name, shape, _, _, nbytes in tensors:
        head += gguf_string(name) + struct.pack("<I", len(shape))
        head += b"".join(struct.pack("<Q", d) for d in reversed(shape))  # ne[0] is the row length
        head += struct.pack("<IQ", GGUF_TYPE_BF16, offset)
        offset += -(-nbytes // ALIGNMENT) * ALIGNMENT
    head += b"\0" * (-len(head) % ALIGNMENT)
    with open(out, "wb") as o:
        o.write(head)
        for _, _, shard, begin, nbytes in tensors:
            with open(shard, "rb") as f:
                f.seek(begin)
                left = nbytes
                while left:
                    block = f.read(min(left, 64 << 20))
                    o.write(block)
                    left -= len(block)
            o.write(b"\0" * (-nbytes % ALIGNMENT))


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit("usage: snapshot_to_gguf.py SNAPSHOT_DIR OUT.gguf")
    main(sys.argv[1], sys.argv[2])
