#!/usr/bin/env bash
# One GPU-machine session: correctness first, then every timing, logs under $OUT.
# Run through the device tool from the repository root, with a static build carried in
# .device-bin and, for the bitsandbytes peer, its public source in .peer/bnb-src built on the
# GPU machine in the same device command (BNB= names another place; nothing of it is
# committed):
#
#   cmake -S . -B build-device -G Ninja -DIRIS_CUDA=ON -DIRIS_STATIC=ON -DIRIS_KERNEL_PROBES=ON
#   cmake --build build-device --target iris kernels_tests api_tests api_cuda_tests libiris iris_upload_bench iris_make_snapshot
#   bash bench/pack_device_bin.sh      # gzipped binaries + libiris.so.1 + the cuda_gemv example into .device-bin
#   device run (carry .device-bin .peer):  bash bench/gpu_run.sh [quick|sanitize|limits|dequant|experts|api|full|bench|variants|ncu]
#
# SKIP_UPLOAD=1 leaves out the upload benchmark, VARIANTS=0 the variant and tile sweeps,
# VARIANT_LIST / TILE_LIST the sweeps' entries (TILE_LIST= none), PROBES=1 adds the
# decode-free GEMV probe (every format, batch 1 and 16) to them, NCU_VARIANT / NCU_FORMATS
# pick what Nsight Compute profiles, PTX_BUILDS the PTX-only builds whose cases run (default
# "ptx ptx75": compute_75 + compute_80, and compute_75 alone; " " none). Each device command
# has 10 minutes, and the driver's compile of a PTX-only build takes about 4 of them.
# Modes: quick = kernel cases + verify; limits = quick + what bounds each kernel goal (the
# floors of each case's bytes, the filled wave 16896x4096, both probes, Nsight Compute on the
# dequants: kernels/NOTES.md run v35); dequant = quick + the dequant's item size against its
# unroll, floors, probes, Nsight Compute (run v37); experts = quick + the expert GEMV with and
# without its decode over 2880-8448 rows per expert (run v37b); api = quick + the C API on the GPU (api_cuda_tests, the
# cuda_gemv example, the upload benchmark of a 4 GB archive); full = api + peers, bench,
# variants; bench = peers, bench, variants alone; variants = the variant and tile sweeps and
# Nsight Compute alone (the second command of a session whose first ran full with VARIANTS=0);
# sanitize / ncu add compute-sanitizer / Nsight Compute.
# Files back: env.txt, tests.log, tests-ptx.log, tests-ptx75.log, verify.log, api.log, python.log, upload.json,
# peers.json, hf_export.log, bench.json, variants.txt (ncu.txt, sanitizer.log, limits.txt + ncu-dequant.txt, sweep.txt,
# experts.txt in those modes).
set -uo pipefail
. bench/device_env.sh
OUT=${OUT:-/tmp/iris-gpu-run}
mkdir -p "$OUT"
T=$(mktemp -d)
mode=${1:-full}

{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.draw,temperature.gpu --format=csv; date -u; } > "$OUT/env.txt" 2>&1

upload_configs=${UPLOAD_CONFIGS:-"0,0,0 8,64,4 16,64,4 8,16,4 16,16,4 8,8,8 16,8,8 8,4,8 16,4,8 8,4,16 16,4,16 8,2,16 16,2,16"}
if [ "$mode" = upload ] || [ "$mode" = bench ] || [ "$mode" = variants ]; then tests_rc=0; else
echo "== kernel cases (dequant bit-exact, GEMV within bound) =="
"$B/kernels_tests" --gtest_brief=1 > "$OUT/tests.log" 2>&1; tests_rc=$?
tail -n 4 "$OUT/tests.log"
# The same cases from the PTX-only builds (bench/pack_device_bin.sh): compute_75 + compute_80
# (the driver compiles compute_80 for this card: the Ampere paths) and compute_75 alone (the
# Turing paths: CUDA-core GEMV, no BF16 instructions). The first line of each log names the
# architecture the driver loaded.
for p in ${PTX_BUILDS:-ptx ptx75}; do
  [ -x "$B/kernels_tests_$p" ] || continue
  echo "== kernel cases, $p build =="
  "$B/kernels_tests_$p" --gtest_brief=1 > "$OUT/tests-$p.log" 2>&1; rc=$?
  [ $rc -ne 0 ] && tests_rc=$rc
  grep -m1 "kernel code" "$OUT/tests-$p.log"; tail -n 3 "$OUT/tests-$p.log"
done

echo "== iris verify --device cuda on converted fixtures =="
{
  set -x
  for f in gptoss-mxfp4 llama-nf4-dq llama-fp8-block; do
    "$B/iris" convert "tests/data/fixtures/$f" -o "$T/$f.iris" --force && "$B/iris" verify "$T/$f.iris" --device cuda
  done
  # FP8 block scales of either sign and zero (transformers' FineGrained FP8 writes such):
  # the GPU must agree with the CPU reference; verify warns (exit 0), --strict fails (exit 4).
  python3 bench/make_signed_fp8_snapshot.py "$T/signed-fp8" 1 &&
    "$B/iris" convert "$T/signed-fp8" -o "$T/signed-fp8.iris" --force && "$B/iris" verify "$T/signed-fp8.iris" --device cuda
  echo "signed-fp8 verify exit $?"
  "$B/iris" verify "$T/signed-fp8.iris" --device cuda --strict -q > /dev/null; echo "signed-fp8 verify --strict exit $? (4 expected)"
  for q in mxfp4 nf4 fp8 fp8-channel fp8-block; do  # kept for the C API runs below as bf16-*.iris
    "$B/iris" convert tests/data/fixtures/llama-bf16 -o "$T/bf16-$q.iris" --quant "$q" --force && "$B/iris" verify "$T/bf16-$q.iris" --device cuda
  done
  # A flipped byte inside a quantized tile (the middle of the first MXFP4 tensor's codes;
  # component offsets are relative to the data section, whose offset is preamble bytes 32..39)
  # must fail (exit 4).
  cp "$T/bf16-mxfp4.iris" "$T/bad.iris"
  off=$("$B/iris" inspect "$T/bad.iris" --json | python3 -c '
import json, struct, sys
t = next(t for t in json.load(sys.stdin)["tensors"] if t["format"] == "mxfp4")
c = next(c for c in t["components"] if c["role"] == "codes")
data = struct.unpack_from("<Q", open(sys.argv[1], "rb").read(64), 32)[0]
print("flipping a byte of", t["name"], file=sys.stderr)
print(data + c["offset"] + c["bytes"] // 2)' "$T/bad.iris")
  byte=$(od -An -tu1 -j "$off" -N1 "$T/bad.iris" | tr -d ' ')
  printf "\\$(printf '%03o' $(( byte ^ 0x10 )))" | dd of="$T/bad.iris" bs=1 seek="$off" conv=notrunc status=none
  "$B/iris" verify "$T/bad.iris" --device cuda; echo "corrupted tile: exit $?"
  set +x
} 2>&1 | sed "s|$T/|\$T/|g" > "$OUT/verify.log"  # the temporary folder as $T: no machine paths in committed logs
grep -E "corrupted tile|FAIL|error" "$OUT/verify.log" | head -n 20

if [ "$mode" = sanitize ]; then
  echo "== compute-sanitizer memcheck over the kernel cases =="
  compute-sanitizer --tool memcheck --print-limit 20 "$B/kernels_tests" --gtest_brief=1 > "$OUT/sanitizer.log" 2>&1
  echo "memcheck exit $?"; tail -n 6 "$OUT/sanitizer.log"
fi
case "$mode" in quick|sanitize) exit "$tests_rc";; esac
if [ "$mode" = limits ]; then
  # The same cases three ways: as they are, with the decodes left out (both probes: outputs
  # meaningless), and on 16896 rows, the stripes that fill every slot the registers allow.
  {
    cases="--synthetic mxfp4:14336x4096 --synthetic nf4:14336x4096 --synthetic fp8:14336x4096 --synthetic mxfp4:4096x1024 \
      --synthetic nf4:4096x1024 --synthetic fp8:4096x1024 --synthetic mxfp4:32x5760x2880 --synthetic mxfp4:16896x4096 \
      --synthetic nf4:16896x4096 --synthetic fp8:16896x4096"
    echo "--- defaults, with the floors"; "$B/iris" bench --floors $cases
    echo "--- --variant gemv-probe=skip-decode --variant dequant-probe=skip-decode (time only)"
    "$B/iris" bench --variant gemv-probe=skip-decode --variant dequant-probe=skip-decode $cases
  } > "$OUT/limits.txt" 2>&1
  cat "$OUT/limits.txt"
  if command -v ncu >/dev/null; then
    echo "== Nsight Compute: the dequants =="
    for f in nf4:14336x4096 fp8:14336x4096 mxfp4:14336x4096 mxfp4:32x5760x2880; do
      ncu --section SpeedOfLight --section Occupancy --section SchedulerStats --section WarpStateStats -k "regex:dequant_items" \
        --launch-count 1 "$B/iris" bench --synthetic "$f" --batch 1 --replays 1
    done 2>&1 | sed "s|$PWD/||g" > "$OUT/ncu-dequant.txt"
    grep -E "dequant_items|DRAM Throughput|Memory Throughput|Compute \(SM\)|Issue Slots Busy|No Eligible|Achieved Occupancy|Duration" "$OUT/ncu-dequant.txt" | head -n 60
  fi
  exit "$tests_rc"
fi
if [ "$mode" = dequant ]; then
  # The dequant's item size (8 or 16 elements) against its unroll, with the floors and the
  # decode-free probes at both sizes, then Nsight Compute on NF4 and FP8 at both sizes
  # (kernels/NOTES.md run v37).
  cases="--synthetic mxfp4:14336x4096 --synthetic nf4:14336x4096 --synthetic fp8:14336x4096 --synthetic mxfp4:32x5760x2880 \
    --synthetic nf4:32x5760x2880 --synthetic fp8:32x5760x2880"
  {
    for it in 8 16; do for u in 1 2 4; do
      echo "--- --variant dequant-item=$it --variant dequant-unroll=$u"
      "$B/iris" bench --batch 1 --variant dequant-item=$it --variant dequant-unroll=$u $cases | grep -E "dequant|copy"
    done; done
    echo "--- defaults, floors"; "$B/iris" bench --batch 1 --floors $cases
    for it in 8 16; do
      echo "--- probe, item $it (unroll defaults)"
      "$B/iris" bench --batch 1 --variant dequant-item=$it --variant dequant-probe=skip-decode $cases | grep -E "dequant|copy"
    done
  } > "$OUT/sweep.txt" 2>&1
  cat "$OUT/sweep.txt"
  if command -v ncu >/dev/null; then
    for f in nf4:14336x4096 fp8:14336x4096; do for it in 8 16; do
      echo "### $f item $it"
      ncu --section SpeedOfLight --section Occupancy --section SchedulerStats --section WarpStateStats -k "regex:dequant_items" \
        --launch-count 1 "$B/iris" bench --synthetic "$f" --batch 1 --replays 1 --variant dequant-item=$it
    done; done 2>&1 | sed "s|$PWD/||g" > "$OUT/ncu-dequant.txt"
    grep -E "^###|DRAM Throughput|No Eligible|Achieved Occupancy|Duration|SM Frequency" "$OUT/ncu-dequant.txt"
  fi
  exit "$tests_rc"
fi
if [ "$mode" = experts ]; then
  # The expert GEMV as it is and without its decode, from 2880 to 8448 rows per expert: what
  # its loop costs when decoding is free, and at which size its per-byte rate is best
  # (kernels/NOTES.md run v37b).
  cases=""
  for n in 2880 4224 5280 5760 6336 7392 8448; do for f in mxfp4 nf4 fp8; do cases="$cases --synthetic $f:32x${n}x2880"; done; done
  {
    echo "--- defaults"; "$B/iris" bench --batch 1 $cases | grep -E "gemv_experts|copy"
    echo "--- --variant gemv-probe=skip-decode (time only)"; "$B/iris" bench --batch 1 --variant gemv-probe=skip-decode $cases | grep -E "gemv_experts|copy"
  } > "$OUT/experts.txt" 2>&1
  cat "$OUT/experts.txt"
  exit "$tests_rc"
fi
fi  # not upload

if [ "$mode" != bench ] && [ "$mode" != variants ]; then
echo "== the C API on the GPU: upload, dequant, GEMV (api_cuda_tests), the CUDA example =="
[ "$mode" != upload ] && {
  "$B/api_cuda_tests" --gtest_brief=1; echo "api_cuda_tests exit $?"
  "$B/api_tests" --gtest_brief=1; echo "api_tests exit $?"
  for f in gptoss-mxfp4 llama-nf4-dq llama-fp8-block bf16-nf4 bf16-fp8; do
    [ -e "$T/$f.iris" ] && "$B/cuda_gemv" "$T/$f.iris"; echo "cuda_gemv $f exit $?"
  done
} > "$OUT/api.log" 2>&1
grep -E "exit|OK|MISMATCH|FAILED|PASSED" "$OUT/api.log" | head -n 30

echo "== the Python package on the GPU: iris.torch (load, QuantTensor, IrisLinear, a patched Llama) =="
[ "$mode" != upload ] && {
  IRIS_LIBRARY="$PWD/$B/libiris.so.1" PYTHONPATH="$PWD/python" PYTHONUNBUFFERED=1 \
    python3 -m pytest -q -p no:cacheprovider -rs -s python/tests --ignore=python/tests/test_hf_export_gpu.py; echo "python tests exit $?"
} > "$OUT/python.log" 2>&1
grep -E "passed|failed|error|IrisLinear|SKIPPED" "$OUT/python.log" | tail -n 15

if [ "${SKIP_UPLOAD:-0}" != 1 ]; then
echo "== upload of a 4 GB archive from the page cache: iris_cuda_upload vs pinned cudaMemcpy =="
{
  "$B/iris_make_snapshot" "$T/snap4" 4 1 && "$B/iris" convert "$T/snap4" -o "$T/4g.iris" -q --force && rm -rf "$T/snap4"
  ls -l "$T/4g.iris"
} > "$OUT/upload.log" 2>&1
"$B/iris_upload_bench" "$T/4g.iris" 5 $upload_configs > "$OUT/upload.json" 2>> "$OUT/upload.log"
cat "$OUT/upload.json"
rm -f "$T/4g.iris"
fi
fi  # not bench or variants
case "$mode" in api|upload) exit "$tests_rc";; esac

if [ "$mode" != variants ]; then
echo "== peers (cuBLAS via torch, bitsandbytes) =="
PYTHONPATH=${BNB:-.peer/bnb-src}${PYTHONPATH:+:$PYTHONPATH} python3 bench/peers.py > "$OUT/peers.json" 2> "$T/peers.err"; tail -n 3 "$T/peers.err"

echo "== exported Hugging Face folders in transformers (bitsandbytes from the peer build) =="
IRIS_LIBRARY="$PWD/$B/libiris.so.1" PYTHONPATH="$PWD/python:${BNB:-.peer/bnb-src}" PYTHONUNBUFFERED=1 \
  python3 -m pytest -q -p no:cacheprovider -rs -s python/tests/test_hf_export_gpu.py > "$OUT/hf_export.log" 2>&1
echo "hf export tests exit $?"; grep -E "passed|failed|error|max \|logit|equal the" "$OUT/hf_export.log" | tail -n 12

echo "== iris bench (defaults) =="
"$B/iris" bench --peers "$OUT/peers.json" --json > "$OUT/bench.json"
"$B/iris" bench --peers "$OUT/peers.json"
fi

if [ "${VARIANTS:-1}" != 0 ]; then
echo "== variants and tile shapes =="
{
  for v in ${VARIANT_LIST:-dequant-unroll=2 dequant-unroll=4 dequant-unroll=8 gemv-unroll=1 gemv-unroll=2 gemv=cuda-cores \
           gemv-warps=2 gemv-warps=4 gemv-warps=8 fp8-decode=cvt fp8-decode=bits nf4-table=split nf4-table=pairs}; do
    echo "--- --variant $v"
    "$B/iris" bench --variant "$v" --synthetic mxfp4:14336x4096 --synthetic nf4:14336x4096 --synthetic fp8:14336x4096 \
      --synthetic mxfp4:32x5760x2880 --synthetic nf4:32x5760x2880 --synthetic fp8:32x5760x2880
  done
  for t in ${TILE_LIST-16x128 16x512 32x256}; do
    echo "--- --tile $t"
    "$B/iris" bench --tile "$t" --synthetic mxfp4:14336x4096 --synthetic nf4:14336x4096 --synthetic fp8:14336x4096
  done
  # PROBES=1: the tensor-core GEMV with its decode left out (gemv-probe: the outputs are
  # meaningless) -- what the loop costs without the decode, per format, batch 1 and 16.
  if [ "${PROBES:-0}" = 1 ]; then
    echo "--- probe: --variant gemv-probe=skip-decode (time only)"
    "$B/iris" bench --variant gemv-probe=skip-decode --synthetic mxfp4:14336x4096 --synthetic nf4:14336x4096 --synthetic fp8:14336x4096 \
      --synthetic mxfp4:4096x1024 --synthetic nf4:4096x1024 --synthetic fp8:4096x1024
  fi
} > "$OUT/variants.txt" 2>&1
cat "$OUT/variants.txt"

fi
if { [ "$mode" = ncu ] || [ "$mode" = variants ]; } && command -v ncu >/dev/null; then
  ncu_variant=${NCU_VARIANT:+--variant $NCU_VARIANT}  # NCU_VARIANT=NAME=VALUE: profile that variant
  echo "== Nsight Compute: tensor-core GEMV, batch 1 ${NCU_VARIANT:-(defaults)} =="
  for f in ${NCU_FORMATS:-mxfp4 nf4 fp8}; do
    ncu --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats -k "regex:gemv_mma" \
      --launch-count 1 "$B/iris" bench $ncu_variant --synthetic "$f:14336x4096" --batch 1 --replays 1
  done 2>&1 | sed "s|$PWD/||g" > "$OUT/ncu.txt"  # no machine paths in logs that get committed
  echo "== Nsight Compute: grouped expert GEMV (gpt-oss-20b stack, top-4) =="
  for f in ${NCU_FORMATS:-mxfp4 nf4 fp8}; do
    ncu --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats -k "regex:experts_" \
      --launch-count 1 "$B/iris" bench $ncu_variant --synthetic "$f:32x5760x2880" --batch 1 --replays 1
  done 2>&1 | sed "s|$PWD/||g" >> "$OUT/ncu.txt"
  grep -E "gemv_mma|Throughput|Registers Per|Achieved Occupancy|Duration|Block Size|Stall" "$OUT/ncu.txt" | head -n 60
  # Where the batch-1 body's issue slots go: the executed-instruction mix by pipe and the stall
  # reasons per issued instruction (ncu-detail.txt), and the SASS of the MXFP4 kernel
  # (sass-gemv-mxfp4.txt: the loop body's instruction count per chunk).
  stalls=""
  for r in long_scoreboard short_scoreboard wait math_pipe_throttle mio_throttle lg_throttle no_instruction not_selected selected \
           dispatch_stall barrier branch_resolving drain imc_miss tex_throttle misc; do
    stalls="$stalls,smsp__average_warps_issue_stalled_${r}_per_issue_active.ratio"
  done
  for f in ${NCU_FORMATS:-mxfp4 nf4 fp8}; do
    ncu --section InstructionStats --section ComputeWorkloadAnalysis --metrics "smsp__inst_executed.sum${stalls}" \
      -k "regex:gemv_mma" --launch-count 1 "$B/iris" bench $ncu_variant --synthetic "$f:14336x4096" --batch 1 --replays 1
  done 2>&1 | sed "s|$PWD/||g" > "$OUT/ncu-detail.txt"
  grep -E "gemv_mma_kernel|inst_executed.sum|stalled|Executed Ipc|Issue Slots|Pipe" "$OUT/ncu-detail.txt" | head -n 80
fi
if { [ "$mode" = ncu ] || [ "$mode" = variants ]; } && command -v cuobjdump >/dev/null; then
  cuobjdump -sass "$B/iris" 2>/dev/null | awk '/Function : /{p = ($0 ~ /gemv_mma_kernel/ && $0 ~ /MmaMxfp4/)} p' \
    > "$OUT/sass-gemv-mxfp4.txt"
  echo "sass lines: $(wc -l < "$OUT/sass-gemv-mxfp4.txt")"
fi
exit "$tests_rc"
