#!/usr/bin/env bash
# The decode session on the GPU machine (issue 25), from the repository root, with the static
# build carried in .device-bin (bench/pack_device_bin.sh):
#
#   device run (carry .device-bin):  bash bench/decode_run.sh [tests|bench|all] [decode_bench.py options...]
#
# tests: python/tests/test_models_gpu.py (iris.models against transformers on the same
# archives) and test_torch_compile_gpu.py; bench: bench/decode_bench.py (whole models, CUDA
# graphs, timelines, greedy checks; default: Llama-3-8B in four formats and gpt-oss-20b as
# shipped); all: both. Files back under $OUT: env.txt, models_tests.log, decode.json, decode.log.
set -uo pipefail
. bench/device_env.sh
export IRIS_LIBRARY="$PWD/$B/libiris.so.1" PYTHONPATH="$PWD/python"
OUT=${OUT:-/tmp/iris-decode-run}
mkdir -p "$OUT"
mode=${1:-all}
shift || true
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,memory.total --format=csv; df -h /tmp | tail -1; free -g | head -2; date -u; } > "$OUT/env.txt" 2>&1
rc=0
if [ "$mode" = tests ] || [ "$mode" = all ]; then
  echo "== iris.models against transformers =="
  (cd python/tests && python3 -m pytest -q -x -s test_models_gpu.py test_torch_compile_gpu.py) > "$OUT/models_tests.log" 2>&1 || rc=$?
  tail -n 15 "$OUT/models_tests.log"
fi
if [ "$mode" = bench ] || [ "$mode" = all ]; then
  echo "== decode bench =="
  W=${WORK:-/tmp/iris-decode-work}
  python3 bench/decode_bench.py --iris "$B/iris" --make-snapshot "$B/iris_make_snapshot" --work "$W" --out "$OUT/decode.json" "$@" \
    > "$OUT/decode.stdout.json" 2> "$OUT/decode.log" || rc=$?
  cat "$OUT/decode.log" | grep -v "^\s*$" | tail -n 60
  rm -rf "$W"
fi
exit $rc
