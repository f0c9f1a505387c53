#!/usr/bin/env bash
# The real-size case of issue 12: a gpt-oss-20b-shaped MXFP4 snapshot (about 13.8 GB, made by
# iris_make_snapshot --gpt-oss-20b) converted as it is and to NF4, with time and peak RSS.
#
#   bash bench/convert_gpt_oss.sh [BUILD=build] [WORK=/tmp/iris-gptoss]   (needs about 35 GB free)
set -euo pipefail
cd "$(dirname "$0")/.."
B=${1:-build}
W=${WORK:-/tmp/iris-gptoss}
IRIS="$B/converter/iris"
mkdir -p "$W"
[ -d "$W/snapshot" ] || "$B/bench/iris_make_snapshot" "$W/snapshot" --gpt-oss-20b >&2
bytes=$(du -sb "$W/snapshot" | cut -f1)
for q in keep nf4; do
  sync
  "$IRIS" convert "$W/snapshot" -o "$W/out.iris" --quant "$q" --dry-run --json > "$W/plan.json"
  /usr/bin/time -f "%e %M" -o "$W/time.txt" "$IRIS" convert "$W/snapshot" -o "$W/out.iris" --quant "$q" -q --force
  read -r secs kb < "$W/time.txt"
  out=$(stat -c %s "$W/out.iris")
  python3 - "$q" "$bytes" "$out" "$secs" "$kb" "$W/plan.json" <<'PY'
import json, sys
q, src, out, secs, kb, plan = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
p = json.load(open(plan))
print(json.dumps({"quant": q, "source_gb": round(src / 1e9, 2), "archive_gb": round(out / 1e9, 2), "seconds": secs,
                  "source_gb_per_s": round(src / 1e9 / secs, 2), "peak_rss_mb": round(kb / 1024),
                  "predicted_peak_rss_mb": round(p["predicted_peak_rss_bytes"] / 2**20)}))
PY
  rm -f "$W/out.iris"
done
