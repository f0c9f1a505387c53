#!/usr/bin/env bash
# What bounds `iris merge` on a machine: the merge of N parts against the same bytes moved by
# the system's own tools on the same disk, each from a cold page cache (issue 27: the merge ran
# at 0.93 GB/s on the 16-core GPU host, on one copy stream, not diagnosed).
#
#   bash bench/merge_ceiling.sh PART_FILE... > results.jsonl
#
# Prints one JSON line per measurement: the merge (wall, user and system seconds, GB/s of the
# merged archive), `cat PARTS > FILE && sync FILE` (the page cache's copy and writeback), `cat
# PARTS > /dev/null` (the disk's cold read), and `dd oflag=direct` of as many zero bytes (the
# disk's direct write, which the merge's writer uses). IRIS: the binary (default
# build/converter/iris); OUT: the folder for the outputs (default beside the first part).
# Root: the page cache is dropped before each (/proc/sys/vm/drop_caches); else say so. WARM=1:
# the parts are read into the page cache before each instead (what the merge costs when only
# its writes meet the disk).
set -euo pipefail
IRIS=${IRIS:-build/converter/iris}
[ $# -ge 1 ] || { echo "usage: $0 PART_FILE..." >&2; exit 2; }
OUT=${OUT:-$(dirname "$1")}
bytes=$(cat "$@" | wc -c)
parts=("$@")
cold() {
  sync
  if [ "${WARM:-0}" = 1 ]; then
    cat "${parts[@]}" > /dev/null
  elif [ -w /proc/sys/vm/drop_caches ]; then echo 3 > /proc/sys/vm/drop_caches; else echo "merge_ceiling: not root, the page cache stays warm" >&2; fi
}
# LABEL COMMAND...: one cold run, its wall / user / system seconds as a JSON line.
measure() {
  local label=$1
  shift
  cold
  /usr/bin/time -f "%e %U %S" -o "$OUT/time.txt" "$@"
  read -r wall user sys < "$OUT/time.txt"
  echo "{\"what\": \"$label\", \"bytes\": $bytes, \"wall_s\": $wall, \"user_s\": $user, \"sys_s\": $sys, \"GBps\": $(awk -v b="$bytes" -v s="$wall" 'BEGIN { printf "%.3f", b / s / 1e9 }')}"
}
measure "iris merge" "$IRIS" merge "$@" -o "$OUT/merged.iris" -q --force
rm -f "$OUT/merged.iris"
measure "cat parts > file; sync file" sh -c 'cat "$@" > "$0" && sync "$0"' "$OUT/copied.bin" "$@"
rm -f "$OUT/copied.bin"
[ "${WARM:-0}" = 1 ] || measure "cat parts > /dev/null" sh -c 'cat "$@" > /dev/null' sh "$@"
measure "dd of=file oflag=direct (zeros)" dd if=/dev/zero of="$OUT/direct.bin" bs=16M count=$(( (bytes + 16777215) / 16777216 )) oflag=direct status=none
rm -f "$OUT/direct.bin" "$OUT/time.txt"
echo "{\"cpu\": \"$(lscpu | sed -n 's/^Model name: *//p' | head -1)\", \"cores\": $(nproc), \"filesystem\": \"$(df -T "$OUT" | awk 'NR == 2 { print $2 }')\"}"
