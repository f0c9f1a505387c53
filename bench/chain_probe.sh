#!/usr/bin/env bash
# Run v71 (a measurement aid): MXFP4 N x K then K x N on its output, as two launches and as one
# launch whose blocks wait for each other through a counter (iris bench --chain), batch 1, one
# case a process (a hang in one costs only its own timeout). From the repository root on the
# GPU machine: bash bench/chain_probe.sh   (SHAPES=, PASSES=, VARIANT= to narrow)
set -uo pipefail
. bench/device_env.sh
OUT=${OUT:-/tmp/iris-chain}
mkdir -p "$OUT"
for pass in $(seq "${PASSES:-2}"); do
  for shape in ${SHAPES:-4096x4096 1024x4096 6144x4096 14336x4096}; do
    flags=(); [ -n "${VARIANT:-}" ] && flags+=(--variant "$VARIANT")
    log="$OUT/chain-$pass-$shape.json"
    timeout "${CASE_LIMIT:-40}" "$B/iris" bench --synthetic "mxfp4:$shape" --batch 1 --chain --replays 100 "${flags[@]}" --json > "$log"
    rc=$?
    [ $rc -ne 0 ] && { echo "pass $pass $shape: exit $rc"; continue; }
    python3 - "$log" "$pass" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
for r in j["results"]:
    if r["kernel"] in ("gemv", "gemv_pair", "gemv_chain2"):
        print(f"pass {sys.argv[2]} {r['kernel']:12s} {r['case']:34s} {r['us']:8.2f} us {r.get('equal_to_pair', '')}")
PY
  done
done 2>&1 | tee "$OUT/summary.txt"
