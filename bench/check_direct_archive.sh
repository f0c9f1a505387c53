#!/usr/bin/env bash
# iris_make_snapshot's two outputs of one config agree (ctest make_snapshot_direct_archive): the
# archive it writes straight from the config (--archive [--quant]) and the one `iris convert
# [--quant]` writes from its snapshot hold the same tensors (names, shapes, dtypes, formats,
# parameters, layouts, component sizes) and the same config.json, and `iris verify` passes the
# direct one. Tiny configs: gpt-oss as shipped (MXFP4 expert stacks, padded tiles), and a
# Mixtral in mxfp4 and in nf4 (per-expert and attention weights). NF4's nested offset is the
# mean of the blocks' absmax, so it (and the quant_state text that prints it) is the one
# value-dependent parameter left out of the comparison.
#   bash bench/check_direct_archive.sh MAKE_SNAPSHOT IRIS SOURCE_DIR
set -euo pipefail
make=$1 iris=$2 src=$3
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
python3 - "$src/bench/models" "$T" <<'PY'
import json, sys
models, t = sys.argv[1], sys.argv[2]
g = json.load(open(f"{models}/gpt-oss-20b.json"))
g.update(num_hidden_layers=2, layer_types=["sliding_attention", "full_attention"], hidden_size=320, intermediate_size=192,
         num_attention_heads=4, num_key_value_heads=2, head_dim=64, num_local_experts=3, vocab_size=100)
json.dump(g, open(f"{t}/gpt-oss.json", "w"))
m = json.load(open(f"{models}/mixtral-8x7b.json"))
m.update(num_hidden_layers=2, hidden_size=256, intermediate_size=320, num_attention_heads=4, num_key_value_heads=2, head_dim=64,
         num_local_experts=3, vocab_size=100)
json.dump(m, open(f"{t}/mixtral.json", "w"))
PY
check() {  # NAME CONFIG [QUANT]
  local name=$1 config=$2 quant=${3:-}
  local q=() 
  [ -n "$quant" ] && q=(--quant "$quant")
  "$make" "$T/$name-snap" --config "$config" > /dev/null
  "$iris" convert "$T/$name-snap" -o "$T/$name-converted.iris" -q "${q[@]}"
  "$make" "$T/$name-direct.iris" --config "$config" --archive "${q[@]}" > /dev/null
  "$iris" verify "$T/$name-direct.iris" > /dev/null
  "$iris" inspect --json "$T/$name-converted.iris" > "$T/$name-converted.json"
  "$iris" inspect --json "$T/$name-direct.iris" > "$T/$name-direct.json"
  "$iris" extract "$T/$name-direct.iris" config.json -o "$T/$name-direct-config.json" > /dev/null
  python3 - "$T/$name" "$config" "$quant" <<'PY'
import json, sys
base, config, quant = sys.argv[1], sys.argv[2], sys.argv[3]
VALUE_DEPENDENT = {"nested_offset", "nested_offset_f32_bits", "quant_state_bytes"}
def tensors(path):
    out = {}
    for x in json.load(open(path))["tensors"]:
        params = {k: v for k, v in x.get("params", {}).items() if k not in VALUE_DEPENDENT}
        comps = [(c["role"], None if c["role"] == "quant_state" else c["bytes"]) for c in x["components"]]
        out[x["name"]] = (x["shape"], x["dtype"], x["format"], params, x["layout"], comps)
    return out
a, b = tensors(f"{base}-converted.json"), tensors(f"{base}-direct.json")
assert a.keys() == b.keys(), f"tensor names differ: {sorted(a.keys() ^ b.keys())}"
for name in a:
    assert a[name] == b[name], f"{name}: converted {a[name]} vs direct {b[name]}"
want = quant or "mxfp4"
assert any(v[2] == want for v in b.values()), f"no {want} tensor was written"
assert json.load(open(f"{base}-direct-config.json")) == json.load(open(config)), "config.json differs"
print(f"{base.rsplit('/', 1)[1]} {quant or 'as shipped'}: {len(a)} tensors agree")
PY
}
check gpt-oss "$T/gpt-oss.json"
check mixtral-mxfp4 "$T/mixtral.json" mxfp4
check mixtral-nf4 "$T/mixtral.json" nf4
