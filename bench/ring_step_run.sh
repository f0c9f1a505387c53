#!/usr/bin/env bash
# One GPU call for run v69 (the tensor-core GEMV's ring step: each warp's next three chunks'
# codes in flight through cp.async into shared memory, `--variant gemv-prefetch=ring`), from the
# repository root with the static build carried in .device-bin (bench/pack_device_bin.sh):
#
#   device run (carry .device-bin):  bash bench/ring_step_run.sh
#
# STAGES= picks (default "tests gemv"): tests, the kernel cases and the C API's CUDA cases;
# gemv, the GEMV at the decode step's shapes (SHAPES=) for each format (FORMATS=, default
# "mxfp4 nf4 fp8"; nf4 with the declared BF16 table, as the decode runs it), the default step
# and the ring alternated twice (VARIANTS= others), batch 1 (BATCH=); floors, the read-only
# floors of the same cases. Logs under $OUT: env.txt, tests.log, gemv.txt, floors.txt.
set -uo pipefail
. bench/device_env.sh
OUT=${OUT:-/tmp/iris-ring-run}
mkdir -p "$OUT"
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,memory.total --format=csv; date -u; } > "$OUT/env.txt" 2>&1
stages=" ${STAGES:-tests gemv} "
shapes=${SHAPES:-14336x4096 4096x14336 4096x4096 1024x4096 32x5760x2880 32x2880x2880}
if [[ $stages == *" tests "* ]]; then
  {
    timeout 200 "$B/kernels_tests" --gtest_brief=1; echo "kernels_tests exit $?"
    [ -x "$B/api_cuda_tests" ] && { timeout 60 "$B/api_cuda_tests" --gtest_brief=1; echo "api_cuda_tests exit $?"; }
  } > "$OUT/tests.log" 2>&1
  grep -E "exit|PASSED|FAILED|kernel code" "$OUT/tests.log" | tail -n 12
fi
if [[ $stages == *" gemv "* ]]; then
  for fmt in ${FORMATS:-mxfp4 nf4 fp8}; do
    base=""
    [ "$fmt" = nf4 ] && base="nf4-table=bf16,"
    vs=""
    for v in ${VARIANTS:-default gemv-prefetch=ring,gemv-x-smem=on gemv-prefetch=on,gemv-x-smem=on default gemv-prefetch=ring,gemv-x-smem=on gemv-prefetch=on,gemv-x-smem=on}; do
      if [ "$v" = default ]; then vs="$vs ${base:+${base%,}}"; [ -z "$base" ] && vs="$vs default"
      else vs="$vs $base$v"; fi
    done
    echo "=== $fmt ==="
    FORMATS=$fmt SHAPES="$shapes" VARIANTS="$vs" BATCH="${BATCH:-1}" timeout 150 bash bench/gemv_decode_shapes.sh 2>&1 | grep -E "==|gemv"
  done > "$OUT/gemv.txt" 2>&1
  cat "$OUT/gemv.txt"
fi
if [[ $stages == *" floors "* ]]; then
  cases=()
  for fmt in ${FORMATS:-mxfp4 nf4 fp8}; do for s in $shapes; do cases+=(--synthetic "$fmt:$s"); done; done
  timeout 120 "$B/iris" bench "${cases[@]}" --batch 1 --replays 100 --floors > "$OUT/floors.txt" 2>&1
  grep -E "floor|gemv" "$OUT/floors.txt" | head -n 60
fi
