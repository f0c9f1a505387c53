#!/usr/bin/env bash
# A whole-model A/B of two builds of libiris (a kernel or tuning change that no variant
# reaches from Python): bench/decode_bench.py twice with the same arguments, once per library,
# in one GPU session. From the repository root on the GPU machine:
#
#   LIB_A=.device-bin-off/libiris.so.1 bash bench/decode_ab_libs.sh [decode_bench.py options...]
#
# (.device-bin-off and the like are ignored by git: name them in the device run's carry.)
#
# LIB_A: the baseline library (gzipped is fine); LIB_B: the change (default: the carried
# build's). SIDES="A B C" adds more sides (LIB_C, default the carried build's), and
# ARGS_A / ARGS_B / ARGS_C add options to one side only (--no-programmatic).
# Files under $OUT: decode-A.json / decode-B.json ... and their logs.
set -uo pipefail
. bench/device_env.sh
export PYTHONPATH="$PWD/python"
OUT=${OUT:-/tmp/iris-decode-ab}
mkdir -p "$OUT"
LIB_A=${LIB_A:?the baseline libiris}
rc=0
for side in ${SIDES:-A B}; do
  lib_var=LIB_$side args_var=ARGS_$side
  lib=${!lib_var:-$B/libiris.so.1}
  [ -e "$lib.gz" ] && gunzip -f "$lib.gz"
  read -ra side_args <<< "${!args_var:-}"
  echo "== $side: $lib ${side_args[*]} =="
  W=${WORK:-/tmp/iris-decode-work}-$side
  IRIS_LIBRARY="$PWD/$lib" python3 bench/decode_bench.py --iris "$B/iris" --make-snapshot "$B/iris_make_snapshot" --work "$W" \
    --out "$OUT/decode-$side.json" "$@" "${side_args[@]}" > "$OUT/decode-$side.stdout.json" 2> "$OUT/decode-$side.log" || rc=$?
  grep -E "ms/token|GEMV|cuBLAS|other|Error|error" "$OUT/decode-$side.log" | tail -n 40
  rm -rf "$W"
done
exit $rc
