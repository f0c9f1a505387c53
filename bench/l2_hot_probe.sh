#!/usr/bin/env bash
# Run v70's questions: how much faster is each decode-shape GEMV when its weights are already
# in L2 (`iris bench --l2-hot`: every launch of the graph on the same inputs, "hot") than from
# DRAM (the default: inputs rotated past the L2, "cold")? That gap bounds what an L2 prefetch of
# the next projection's weights can give (run v70b measured one such prefetch, each GEMV's
# blocks asking L2 for the next launch's codes once their own loads were in -- faster at the
# smallest shapes only, slower at the larger ones; that option is in the history, not the tree). And what one launch boundary costs between two GEMVs: 8192x4096 as one launch
# against the grouped 2x4096x4096 and against 4096x4096 twice. MODES= picks the modes and
# their order (default "cold hot cold hot").
# From the repository root on the GPU machine (logs under $OUT):
#   bash bench/l2_hot_probe.sh
set -uo pipefail
. bench/device_env.sh
OUT=${OUT:-/tmp/iris-l2-hot}
mkdir -p "$OUT"
n=0
shapes=${SHAPES:-"4096x4096 6144x4096 14336x4096 4096x14336 2x14336x4096 8192x4096 2x4096x4096 32x5760x2880 32x2880x2880"}
for fmt in ${FORMATS:-mxfp4 nf4 fp8}; do
  flags=()
  [ "$fmt" = nf4 ] && flags+=(--variant nf4-table=bf16)
  cases=()
  for s in $shapes; do cases+=(--synthetic "$fmt:$s"); done
  for mode in ${MODES:-cold hot cold hot}; do
    extra=()
    [ $mode = hot ] && extra+=(--l2-hot)
    echo "== $fmt $mode =="
    n=$((n + 1)); log="$OUT/$fmt-$mode-$n.json"
    "$B/iris" bench "${cases[@]}" --batch 1 --replays 100 --floors "${flags[@]}" "${extra[@]}" --json > "$log"
    python3 - "$log" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
print(f"device {j['device']} l2 {j['l2_bytes']/2**20:.0f} MiB copy {j.get('copy_gbps', 0):.0f} GB/s hot {j['l2_hot']}")
for r in j["results"]:
    if r["kernel"] in ("gemv", "gemv_experts", "floor-read"):
        print(f"  {r['kernel']:13s} {r['case']:28s} {r['us']:8.2f} us {r['gbps']:7.0f} GB/s")
PY
  done
done 2>&1 | tee "$OUT/summary.txt"
