#!/usr/bin/env bash
# Rank archives on N GPUs (issue 27): for each case, `iris shard` then `iris verify --ranks
# --against --device cuda`, then examples/tensor_parallel/tp_layers.py (every quantized weight's GEMV over the
# ranks against the whole archive's on one GPU). From the repository root on a machine of N
# GPUs, with the static build carried in $B (bench/pack_device_bin.sh):
#
#   device run (kind nvidia-h100-x2, carry the build):  bash bench/tp_layers_run.sh 2
#
# Cases: the fixtures in MXFP4, NF4 (o and down kept BF16: their column cuts would cross NF4
# double-quantization groups) and FP8 channel, gpt-oss as shipped with --ep 1 and --ep N, and
# Llama-3-8B's shapes (bench/models/llama-3-8b.json) cut to 4 layers, written straight to an
# MXFP4 archive. Files back under $OUT: one log per case.
set -uo pipefail
. bench/device_env.sh
export IRIS_LIBRARY="$PWD/$B/libiris.so.1" PYTHONPATH="$PWD/python" PYTHONUNBUFFERED=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT=${OUT:-/tmp/iris-tp-run}
W=${WORK:-/tmp/iris-tp-work}
N=${1:-2}
mkdir -p "$OUT" "$W"
F=tests/data/fixtures
rc=0
run_case() {  # NAME ARCHIVE SHARD_OPTIONS
  local name=$1 archive=$2
  shift 2
  {
    echo "== $name: iris shard $* =="
    rm -rf "$W/ranks"
    "$B/iris" shard "$archive" -o "$W/ranks" -q "$@" &&
      "$B/iris" verify --ranks "$W/ranks" --against "$archive" --device cuda &&
      python3 examples/tensor_parallel/tp_layers.py "$archive" "$W/ranks" "$N"
  } > "$OUT/$name.log" 2>&1 || rc=1
  grep -E "^==|ranks|OK|FAIL|bound|error|Traceback" "$OUT/$name.log" | tail -n 6
}
"$B/iris" convert $F/llama-bf16 -o "$W/mx.iris" -q --quant mxfp4 --force && run_case llama-mxfp4 "$W/mx.iris" --tp "$N"
"$B/iris" convert $F/llama-bf16 -o "$W/nf.iris" -q --quant nf4 --rule '(o_proj|down_proj)=bf16' --force && run_case llama-nf4 "$W/nf.iris" --tp "$N"
"$B/iris" convert $F/llama-bf16 -o "$W/fc.iris" -q --quant fp8-channel --force && run_case llama-fp8-channel "$W/fc.iris" --tp "$N"
"$B/iris" convert $F/gptoss-mxfp4 -o "$W/g.iris" -q --force && run_case gptoss "$W/g.iris" --tp "$N" && run_case gptoss-ep "$W/g.iris" --tp "$N" --ep "$N"
python3 - "$W" <<'EOF'
import json, sys
c = json.load(open("bench/models/llama-3-8b.json"))
c["num_hidden_layers"] = 4
json.dump(c, open(sys.argv[1] + "/llama4.json", "w"))
EOF
"$B/iris_make_snapshot" "$W/l8.iris" --config "$W/llama4.json" --archive --quant mxfp4 > /dev/null && run_case llama-3-8b-4-layers-mxfp4 "$W/l8.iris" --tp "$N"
rm -rf "$W"
exit $rc
