#!/usr/bin/env bash
# A whole tensor-parallel decode on N GPUs (issue 27): for each model, its archive written
# straight from the config (iris_make_snapshot --archive: random weights, real shapes), `iris
# shard --tp N`, `iris verify --ranks --against`, then examples/tensor_parallel/tp_decode.py
# (every rank decodes, greedy, in CUDA graphs; rank 0 then decodes the whole archive alone and
# compares the tokens). From the repository root on a machine of N GPUs, with the static build
# carried in $B (bench/pack_device_bin.sh):
#
#   device run (kind nvidia-h200-x2, carry the build):  bash bench/tp_decode_run.sh 2 [MODEL:FORMAT ...]
#
# MODEL is a config in bench/models (llama-3-8b, gpt-oss-20b, gpt-oss-120b, mixtral-8x7b),
# FORMAT mxfp4 / nf4 / as-shipped (gpt-oss's MXFP4 experts and BF16 rest); default
# "llama-3-8b:mxfp4 gpt-oss-20b:as-shipped". LAYERS=L keeps the first L layers of each config
# (a model that would not fit the machine's disk twice, whole and as ranks). STEPS (default 64).
# EP=N shards with --ep N too (each rank its experts whole; iris.models takes ep 1 or ep = N).
# BACKEND=gloo runs the ranks on one GPU, eagerly (tp_decode.py says why): a check of the
# tokens where fewer GPUs than ranks are lent, not a timing.
# EXACT=1 runs both sides with exact sums (iris.models' exact_sums=True: tokens equal by
# construction where the split is right; weights as FP32 but MXFP4 expert stacks, a checking
# mode).
# EXCHANGE=symmetric sums the ranks' partials through symmetric memory (iris.models' exchange=).
# KNOCK_OUT=1 also times each rank with its all_reduce of partial sums knocked out (timing only:
# what the exchanges cost inside the step's graph; tp_decode.py --knock-out-reductions).
# NOISE_FLOOR=0 leaves out the whole model's second load in its other arithmetic (its noise
# floor: minutes at gpt-oss-120b's size).
# VERIFY=0 leaves out `iris verify --ranks --against` (a CPU decode of every box: minutes at
# gpt-oss-120b's size).
# Files back under $OUT: one log and one JSON per case.
set -uo pipefail
. bench/device_env.sh
export IRIS_LIBRARY="$PWD/$B/libiris.so.1" PYTHONPATH="$PWD/python" PYTHONUNBUFFERED=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT=${OUT:-/tmp/iris-tp-decode-run}
W=${WORK:-/tmp/iris-tp-decode-work}
N=${1:-2}
shift || true
cases=("$@")
[ ${#cases[@]} -gt 0 ] || cases=(llama-3-8b:mxfp4 gpt-oss-20b:as-shipped)
mkdir -p "$OUT" "$W"
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv; nvidia-smi topo -m; df -h "$W" | tail -1; date -u; } > "$OUT/env.txt" 2>&1
# tp_decode.py's options, the same for every case (and the cases' names saying them)
decode_options=(--backend "${BACKEND:-nccl}" --exchange "${EXCHANGE:-process-group}")
exact_suffix=
[ "${EXACT:-0}" = 1 ] && decode_options+=(--exact-sums) && exact_suffix=-exact
[ "${NOISE_FLOOR:-1}" = 0 ] && decode_options+=(--no-noise-floor)
[ "${KNOCK_OUT:-0}" = 1 ] && decode_options+=(--knock-out-reductions)
rc=0
for c in "${cases[@]}"; do
  model=${c%%:*} fmt=${c#*:}
  name="$model-$fmt${LAYERS:+-${LAYERS}layers}-tp$N${EP:+-ep$EP}${EXCHANGE:+-$EXCHANGE}$exact_suffix"
  rm -rf "$W"/*
  python3 - "$model" "$W/config.json" "${LAYERS:-}" <<'EOF'
import json, sys
c = json.load(open(f"bench/models/{sys.argv[1]}.json"))
if sys.argv[3]:
    c["num_hidden_layers"] = int(sys.argv[3])
    if "layer_types" in c:
        c["layer_types"] = c["layer_types"][: int(sys.argv[3])]
json.dump(c, open(sys.argv[2], "w"))
EOF
  quant=()
  [ "$fmt" = as-shipped ] || quant=(--quant "$fmt")
  {
    echo "== $name =="
    t0=$SECONDS
    "$B/iris_make_snapshot" "$W/model.iris" --config "$W/config.json" --archive "${quant[@]}" > /dev/null &&
      echo "archive: $(stat -c %s "$W/model.iris") bytes in $((SECONDS - t0)) s" &&
      /usr/bin/time -f "shard: %e s, peak RSS %M KB" "$B/iris" shard "$W/model.iris" --tp "$N" --ep "${EP:-1}" -o "$W/ranks" -q &&
      { [ "${VERIFY:-1}" = 0 ] || /usr/bin/time -f "verify --ranks: %e s" "$B/iris" verify --ranks "$W/ranks" --against "$W/model.iris" -q; } &&
      python3 examples/tensor_parallel/tp_decode.py "$W/model.iris" "$W/ranks" "$N" --steps "${STEPS:-64}" --json "$OUT/$name.json" \
        "${decode_options[@]}"
  } > "$OUT/$name.log" 2>&1 || rc=1
  grep -E "^==|archive:|shard:|verify|tokens_equal|_ms_per_token|knocked out|rank_load_s|first_difference|Error|error|Traceback" "$OUT/$name.log" | tail -n 12
done
rm -rf "$W"
exit $rc
