#!/usr/bin/env bash
# Nsight Compute on one GEMV launch per format: where its time goes, as stall reasons per
# issued instruction and as warp-state samples per SASS instruction (to find the instruction a
# kernel waits on, not only the reason). From the repository root on the GPU machine, with the
# static build carried in $B (bench/pack_device_bin.sh):
#
#   FORMATS="mxfp4 nf4" SHAPE=14336x4096 VARIANT=nf4-table=bf16 bash bench/ncu_gemv.sh
#
# KERNEL: the kernel-name regex (default gemv_mma; experts_ for a grouped expert shape such as
# SHAPE=32x5760x2880). Clocks are left as they are (--clock-control none, device/METHOD.md).
# Files under $OUT: ncu-<format>.txt (sections and stall ratios) and ncu-sass-<format>.csv
# (per-instruction samples).
set -uo pipefail
. bench/device_env.sh
OUT=${OUT:-/tmp/iris-ncu}
mkdir -p "$OUT"
command -v ncu >/dev/null || { echo "ncu_gemv: no ncu on this machine" >&2; exit 1; }
SHAPE=${SHAPE:-14336x4096}
KERNEL=${KERNEL:-gemv_mma}
variant=${VARIANT:+--variant $VARIANT}
stalls=""
for r in long_scoreboard short_scoreboard wait math_pipe_throttle mio_throttle lg_throttle no_instruction not_selected \
         selected dispatch_stall barrier branch_resolving drain imc_miss tex_throttle misc; do
  stalls="$stalls,smsp__average_warps_issue_stalled_${r}_per_issue_active.ratio"
done
for f in ${FORMATS:-mxfp4 nf4}; do
  ncu --clock-control none --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
    --section SchedulerStats --section InstructionStats --metrics "smsp__inst_executed.sum${stalls}" \
    -k "regex:$KERNEL" --launch-count 1 "$B/iris" bench $variant --synthetic "$f:$SHAPE" --batch 1 --replays 1 \
    2>&1 | sed "s|$PWD/||g" > "$OUT/ncu-$f.txt"
  ncu --clock-control none --section SourceCounters --section WarpStateStats --page source --print-source sass --csv \
    -k "regex:$KERNEL" --launch-count 1 "$B/iris" bench $variant --synthetic "$f:$SHAPE" --batch 1 --replays 1 \
    2>/dev/null | sed "s|$PWD/||g" > "$OUT/ncu-sass-$f.csv"
  echo "== $f $SHAPE ${VARIANT:-} =="
  grep -E "Function Name|Duration|DRAM Throughput|Registers Per|Achieved Occupancy|Issue Slots Busy|No Eligible|inst_executed.sum|stalled_(long|short|wait|math|mio|lg|no_inst|not_sel|barrier|branch)" \
    "$OUT/ncu-$f.txt" | head -n 40
  echo "sass rows: $(wc -l < "$OUT/ncu-sass-$f.csv")"
done
