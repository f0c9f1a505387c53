#!/usr/bin/env bash
# One GPU call for run v68 (MXFP4 code words in bit-plane order on the device): the previous
# build (carried in .device-bin-old: iris and libiris.so.1, xz) against this one (.device-bin),
# interleaved, from the repository root:
#
#   device run (carry .device-bin .device-bin-old):  bash bench/mxfp4_planes_ab.sh
#
# STAGES= picks (default "gemv decode"): gemv, the MXFP4 GEMV at Llama's and gpt-oss's shapes,
# old / new / old / new; decode, bench/decode_ab_libs.sh on MODELS (default llama-3-8b) in
# MXFP4, sides A (old) B (new) C (old) D (new), the BF16 peer on A and B; pytest, the Python
# GPU suite on the new library (PYTEST_FILES= some of it). DECODE_ARGS= adds decode_bench.py options
# to every side (--no-peer). Logs under $OUT: gemv.txt, decode.txt, pytest.log.
set -uo pipefail
OUT=${OUT:-/tmp/iris-planes-ab}
mkdir -p "$OUT"
for f in .device-bin-old/*.xz; do [ -e "$f" ] && xz -d -f "$f"; done
chmod +x .device-bin-old/* 2>/dev/null
stages=" ${STAGES:-gemv decode} "
if [[ $stages == *" gemv "* ]]; then
  for b in .device-bin-old .device-bin .device-bin-old .device-bin; do
    echo "== build $b =="
    B=$b FORMATS=mxfp4 SHAPES="14336x4096 4096x14336 4096x4096 1024x4096 32x5760x2880 32x2880x2880" VARIANTS=default \
      timeout 60 bash bench/gemv_decode_shapes.sh 2>&1 | grep -E "gemv"
  done > "$OUT/gemv.txt" 2>&1
  cat "$OUT/gemv.txt"
fi
if [[ $stages == *" decode "* ]]; then
  SIDES="A B C D" LIB_A=.device-bin-old/libiris.so.1 LIB_C=.device-bin-old/libiris.so.1 ARGS_C="--no-peer" ARGS_D="--no-peer" \
    OUT=/tmp/iris-planes-decode timeout "${DECODE_LIMIT:-330}" bash bench/decode_ab_libs.sh --models "${MODELS:-llama-3-8b}" \
    --formats mxfp4 --direct --steps "${STEPS:-64}" ${DECODE_ARGS:-} > "$OUT/decode.txt" 2>&1
  grep -E "^==|ms/token|greedy|tokens" "$OUT/decode.txt" | head -n 40
fi
if [[ $stages == *" pytest "* ]]; then
  . bench/device_env.sh
  IRIS_LIBRARY="$PWD/.device-bin/libiris.so.1" PYTHONPATH="$PWD/python" timeout "${PYTEST_LIMIT:-240}" python3 -m pytest -q -p no:cacheprovider -rs \
    ${PYTEST_FILES:-python/tests/test_decode_ops_gpu.py python/tests/test_torch_gpu.py python/tests/test_models_gpu.py python/tests/test_torch_compile_gpu.py python/tests/test_hf_export_gpu.py} \
    > "$OUT/pytest.log" 2>&1
  echo "pytest exit $?"; tail -n 5 "$OUT/pytest.log"
fi
