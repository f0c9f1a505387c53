#!/usr/bin/env bash
# One GPU call for the gated activation's formats (issue 25, runs v66-v67), from the
# repository root with the static build carried in .device-bin (bench/pack_device_bin.sh):
#
#   device run (carry .device-bin):  bash bench/gated_formats_run.sh
#
# 1. tests: the kernel cases, the C API's CUDA cases, the Python gated-activation tests;
# 2. probe: the MXFP4 GEMV at Llama's and gpt-oss's shapes as it is and without its decode
#    (skip-decode), twice (run v67 had a bit-plane probe here, which became the decode in v68);
# 3. decode: Llama-3-8B (MODEL=, STEPS=) per format (FORMATS, default "nf4 fp8-block"), the activation as iris's
#    own launch (--gated-separate) against iris.models' choice (inside the gate/up launch where
#    libiris says its launch takes it: Experts.gated_in_launch), alternated twice (A B C D).
# STAGES= picks the stages (default "tests probe decode"), PYTEST_K= the Python tests (PYTEST_LIMIT= their seconds). Each stage has its own time limit,
# so a slow one cannot take the later ones' logs with it; the logs land under $OUT as at most
# eight files (the device tool's limit): env.txt, tests.log, probe.txt, decode-<format>.txt.
set -uo pipefail
. bench/device_env.sh
export IRIS_LIBRARY="$PWD/$B/libiris.so.1" PYTHONPATH="$PWD/python"
OUT=${OUT:-/tmp/iris-gated-run}
mkdir -p "$OUT"
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,memory.total --format=csv; date -u; git log -1 --format=%H 2>/dev/null; } > "$OUT/env.txt" 2>&1
stages=" ${STAGES:-tests probe decode} "
if [[ $stages == *" tests "* ]]; then
  {
    timeout 150 "$B/kernels_tests" --gtest_brief=1; echo "kernels_tests exit $?"
    timeout 60 "$B/api_cuda_tests" --gtest_brief=1; echo "api_cuda_tests exit $?"
    timeout "${PYTEST_LIMIT:-150}" python3 -m pytest -q -p no:cacheprovider -rs python/tests/test_decode_ops_gpu.py python/tests/test_torch_gpu.py \
      python/tests/test_models_gpu.py -k "${PYTEST_K-gated or silu}"; echo "pytest exit $?"
  } > "$OUT/tests.log" 2>&1
  grep -E "exit|PASSED|FAILED|passed|failed" "$OUT/tests.log" | tail -n 12
fi
if [[ $stages == *" probe "* ]]; then
  FORMATS=mxfp4 SHAPES="${PROBE_SHAPES:-14336x4096 4096x14336 4096x4096 1024x4096 32x5760x2880}" \
    VARIANTS="default gemv-probe=skip-decode default" \
    timeout 120 bash bench/gemv_decode_shapes.sh > "$OUT/probe.txt" 2>&1
  grep -E "==|gemv" "$OUT/probe.txt" | head -n 40
fi
if [[ $stages == *" decode "* ]]; then
  for fmt in ${FORMATS:-nf4 fp8-block}; do
    # (iris_make_snapshot --archive writes MXFP4 and NF4 archives itself; FP8 goes through convert)
    case $fmt in nf4) extra="--nf4-table bf16 --direct" ;; fp8*) extra="" ;; *) extra="--direct" ;; esac
    SIDES="${SIDES:-A B C D}" LIB_A="$B/libiris.so.1" ARGS_A="--gated-separate" ARGS_C="--gated-separate" OUT=/tmp/iris-gated-ab-$fmt \
      timeout "${DECODE_LIMIT:-200}" bash bench/decode_ab_libs.sh --models "${MODEL:-llama-3-8b}" --formats "$fmt" $extra --no-peer \
      --steps "${STEPS:-16}" \
      > "$OUT/decode-$fmt.txt" 2>&1
    grep -E "^==|ms/token" "$OUT/decode-$fmt.txt" | head -n 24
  done
fi
