#!/usr/bin/env bash
# A conversion as N parts merged (iris convert --part I/N, iris merge) against the same
# conversion in one process, on a gpt-oss-20b-shaped snapshot (13.8 GB, random weights,
# bench/iris_make_snapshot --gpt-oss-20b): wall times, the merge's share, and the merged
# archive's SHA-256 against the single run's. Disk: the snapshot plus two archives at once.
#
#   bash bench/parts_bench.sh [N=4] [CONVERT_OPTIONS...]
#
# PARALLEL=1 runs the N parts as concurrent processes (a many-core machine), else one after
# another. DROP_CACHES=1 empties the page cache before each phase (root; each phase then reads
# its input from the disk, as a job on a fresh node would). IRIS, MAKE_SNAPSHOT: the binaries (default build/...); WORK: scratch (default
# /tmp/iris-parts-bench); SNAPSHOT: an existing snapshot folder to use instead of making one.
set -euo pipefail
n=${1:-4}
shift || true
IRIS=${IRIS:-build/converter/iris}
MAKE_SNAPSHOT=${MAKE_SNAPSHOT:-build/bench/iris_make_snapshot}
W=${WORK:-/tmp/iris-parts-bench}
mkdir -p "$W"
snap=${SNAPSHOT:-$W/snapshot}
if [ ! -e "$snap/config.json" ]; then
  echo "making $snap"
  "$MAKE_SNAPSHOT" "$snap" --gpt-oss-20b > /dev/null
fi
now() { date +%s.%N; }
cold() { sync; [ "${DROP_CACHES:-0}" = 1 ] && echo 3 > /proc/sys/vm/drop_caches; true; }
minus() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a - b }'; }
cold
t0=$(now); "$IRIS" convert "$snap" -o "$W/whole.iris" -q --force "$@"; t1=$(now)
whole_s=$(minus "$t1" "$t0")
whole_sha=$(sha256sum "$W/whole.iris" | cut -d' ' -f1)
bytes=$(stat -c %s "$W/whole.iris")
rm -f "$W/whole.iris"
cold
t0=$(now)
if [ "${PARALLEL:-0}" = 1 ]; then
  for i in $(seq 1 "$n"); do "$IRIS" convert "$snap" -o "$W/part$i.iris" -q --force --part "$i/$n" "$@" & done
  wait
else
  for i in $(seq 1 "$n"); do "$IRIS" convert "$snap" -o "$W/part$i.iris" -q --force --part "$i/$n" "$@"; done
fi
t1=$(now)
parts_s=$(minus "$t1" "$t0")
part_sizes=$(for i in $(seq 1 "$n"); do stat -c %s "$W/part$i.iris"; done | paste -sd, -)
cold
t0=$(now); "$IRIS" merge $(for i in $(seq 1 "$n"); do echo "$W/part$i.iris"; done) -o "$W/merged.iris" -q --force; t1=$(now)
merge_s=$(minus "$t1" "$t0")
merged_sha=$(sha256sum "$W/merged.iris" | cut -d' ' -f1)
rm -f "$W"/part*.iris "$W/merged.iris"
cpu=$(lscpu | sed -n 's/^Model name: *//p' | head -1)
cat <<JSON
{"parts": $n, "parallel": ${PARALLEL:-0}, "cold_cache": ${DROP_CACHES:-0}, "options": "$*", "archive_bytes": $bytes, "part_bytes": [$part_sizes],
 "single_process_s": $whole_s, "parts_s": $parts_s, "merge_s": $merge_s,
 "merge_share_of_single": $(awk -v a="$merge_s" -v b="$whole_s" 'BEGIN { printf "%.3f", a / b }'),
 "identical": $([ "$whole_sha" = "$merged_sha" ] && echo true || echo false), "sha256": "$merged_sha",
 "cpu": "$cpu", "cores": $(nproc)}
JSON
