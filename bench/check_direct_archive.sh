#!/usr/bin/env bash
# iris_make_snapshot's two outputs of one config agree (ctest make_snapshot_direct_archive): the
# archive it writes straight from the config (--archive) and the one `iris convert` writes from
# its snapshot hold the same tensors (names, shapes, dtypes, formats, layouts, component sizes)
# and the same config.json, and `iris verify` passes the direct one. A tiny gpt-oss config, so
# that the MXFP4 expert stacks and their tiled codes (with padded columns) are covered.
#   bash bench/check_direct_archive.sh MAKE_SNAPSHOT IRIS SOURCE_DIR
set -euo pipefail
make=$1 iris=$2 src=$3
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
python3 - "$src/bench/models/gpt-oss-20b.json" "$T/config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c.update(num_hidden_layers=2, layer_types=["sliding_attention", "full_attention"], hidden_size=320, intermediate_size=192,
         num_attention_heads=4, num_key_value_heads=2, head_dim=64, num_local_experts=3, vocab_size=100)
json.dump(c, open(sys.argv[2], "w"))
PY
"$make" "$T/snap" --config "$T/config.json" > /dev/null
"$iris" convert "$T/snap" -o "$T/converted.iris" -q
"$make" "$T/direct.iris" --config "$T/config.json" --archive > /dev/null
"$iris" verify "$T/direct.iris" > /dev/null
"$iris" inspect --json "$T/converted.iris" > "$T/converted.json"
"$iris" inspect --json "$T/direct.iris" > "$T/direct.json"
"$iris" extract "$T/direct.iris" config.json -o "$T/direct-config.json" > /dev/null
python3 - "$T" <<'PY'
import json, sys
t = sys.argv[1]
def tensors(path):
    d = json.load(open(path))
    return {x["name"]: (x["shape"], x["dtype"], x["format"], x["layout"], [(c["role"], c["bytes"]) for c in x["components"]])
            for x in d["tensors"]}
a, b = tensors(f"{t}/converted.json"), tensors(f"{t}/direct.json")
assert a.keys() == b.keys(), f"tensor names differ: {sorted(a.keys() ^ b.keys())}"
for name in a:
    assert a[name] == b[name], f"{name}: converted {a[name]} vs direct {b[name]}"
assert any(v[2] == "mxfp4" for v in b.values()), "no MXFP4 tensor was written"
assert json.load(open(f"{t}/direct-config.json")) == json.load(open(f"{t}/config.json")), "config.json differs"
print(f"{len(a)} tensors agree")
PY
