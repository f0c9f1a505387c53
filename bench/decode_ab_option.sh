#!/usr/bin/env bash
# A whole-model A/B of one iris.models switch with one library (a Python-side option of
# bench/decode_bench.py such as --no-residual-norm or --no-rope-in-attention), in one GPU session:
# the decode-kernel cases first (bit for bit against their CPU references), then
# bench/decode_ab_libs.sh with the carried libiris on both sides, side A with the option and
# side B without, per model. From the repository root on the GPU machine:
#
#   bash bench/decode_ab_option.sh --no-rope-in-attention [MODELS=gpt-oss-20b,llama-3-8b]
#
# MODELS: comma-separated decode_bench models (Llama-3-8B runs as MXFP4); STEPS (default 32).
# Files under $OUT: decode-ops.log and, per model, <model>/decode-A.json, decode-B.json and logs.
set -uo pipefail
option=${1:?the decode_bench.py option to compare, e.g. --no-rope-in-attention}
. bench/device_env.sh
OUT=${OUT:-/tmp/iris-decode-ab-option}
mkdir -p "$OUT"
"$B/kernels_tests" --gtest_filter='DecodeOps.*' > "$OUT/decode-ops.log" 2>&1
rc=$?
grep -E "^\[ +(OK|FAILED|PASSED) " "$OUT/decode-ops.log" | tail -n 12
[ $rc -ne 0 ] && { echo "decode-kernel cases failed: no timing"; exit $rc; }
IFS=, read -ra models <<< "${MODELS:-gpt-oss-20b,llama-3-8b}"
for m in "${models[@]}"; do
  extra=(--direct --no-peer --steps "${STEPS:-32}")
  [ "$m" = llama-3-8b ] && extra+=(--formats mxfp4)
  echo "== $m: A with $option, B without =="
  SIDES="A B" LIB_A="$B/libiris.so.1" LIB_B="$B/libiris.so.1" ARGS_A="$option" OUT="$OUT/$m" \
    bash bench/decode_ab_libs.sh --models "$m" "${extra[@]}" | grep -E "==|ms/token" || rc=1
done
exit $rc
