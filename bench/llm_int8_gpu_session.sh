#!/usr/bin/env bash
# bitsandbytes LLM.int8 on the GPU machine, in one call:
#  makers: bitsandbytes built from its public source (carried in the ignored .peer/bnb-src,
#          never committed; CMake + nvcc for this card), then tests/fixture_makers/bnb_llm_int8.py
#          writes the fixtures and references under $OUT (to be trimmed and committed with
#          tests/fixture_makers/trim_fixture.py).
#  verify: each LLM.int8 snapshot (the makers' full ones and the repository's trimmed ones)
#          converted as stored and put through `iris verify --device cuda` (needs the carried
#          static build: B, default .device-bin, with iris and libiris.so.1), then
#          python/tests/test_bnb_int8.py, test_int_group_gpu.py (dequantization bit for bit and
#          the linear within its bound on the GPU) and test_tool_twins_gpu.py (the patched
#          transformers Llama against its dequantized twin, on the maker's full snapshot).
#
#   device run (carry .device-bin .peer/bnb-src):  bash bench/llm_int8_gpu_session.sh [makers|verify|all]
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/iris-int8}
mkdir -p "$OUT/fixtures" "$OUT/refs" "$OUT/archives"
what=${1:-all}
rc=0
BNB=.peer/bnb-src
if [ "$what" = makers ] || [ "$what" = all ]; then
  start=$(date +%s)
  (cd "$BNB" && cmake -S . -B build -G Ninja -DCOMPUTE_BACKEND=cuda -DCOMPUTE_CAPABILITY="$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d .)" \
     && ninja -C build) > "$OUT/bnb-build.log" 2>&1 || { rc=1; echo "FAIL bitsandbytes build: $(tail -c 1500 "$OUT/bnb-build.log")"; }
  echo "bitsandbytes built in $(( $(date +%s) - start )) s: $(ls $BNB/bitsandbytes/*.so 2>/dev/null)"
  PYTHONPATH="$BNB" python3 tests/fixture_makers/bnb_llm_int8.py --out-fixtures "$OUT/fixtures" --out-refs "$OUT/refs" \
    > "$OUT/maker.json" 2> "$OUT/maker.err" || { rc=1; echo "FAIL maker: $(tail -c 2500 "$OUT/maker.err")"; }
  cat "$OUT/maker.json"; tail -n 5 "$OUT/maker.err"
  ls -la "$OUT/fixtures"/* "$OUT/refs"
fi
if [ "$what" = verify ] || [ "$what" = all ]; then
  . bench/device_env.sh
  I="$PWD/$B/iris"
  export PYTHONPATH="$PWD/python"
  . bench/gpu_verify.sh
  for f in "$OUT"/fixtures/*int8* tests/data/fixtures/*int8*; do
    [ -d "$f" ] || continue
    name=$(basename "$f")
    "$I" convert "$f" -o "$OUT/archives/$name.iris" -q --force || { rc=1; echo "FAIL $name: convert"; continue; }
    verify "$name" "$OUT/archives/$name.iris"
  done
  IRIS_TOOL_SNAPSHOTS="$OUT/fixtures" IRIS_LIBRARY="$PWD/$B/libiris.so.1" PYTHONPATH="$PWD/python:$BNB" python3 -m pytest -q -s -p no:cacheprovider \
    python/tests/test_bnb_int8.py python/tests/test_int_group_gpu.py python/tests/test_tool_twins_gpu.py > "$OUT/pytests.log" 2>&1 || rc=1
  grep -E "IrisLinear|int8 matmul" "$OUT/pytests.log" | head -5
  tail -n 15 "$OUT/pytests.log"
fi
exit $rc
