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
bytes=$(stat -c %s "$@" | awk '{ s += $1 } END { print s }')
parts=("$@")
# What each line's page cache was: dropped, the parts read into it (WARM=1), or as it happened
# to be (not root).
if [ "${WARM:-0}" = 1 ]; then cache=parts-cached
elif [ -w /proc/sys/vm/drop_caches ]; then cache=dropped
else cache=as-found; echo "merge_ceiling: not root, the page cache is not dropped" >&2; fi
trap 'rm -f "$OUT/merged.iris" "$OUT/copied.bin" "$OUT/direct.bin" "$OUT/time.txt"' EXIT
prepare_cache() {
  sync
  case $cache in
    parts-cached) cat "${parts[@]}" > /dev/null ;;
    dropped) echo 3 > /proc/sys/vm/drop_caches ;;
  esac
}
# LABEL COMMAND...: one run from the page cache as $cache, its wall / user / system seconds as a JSON line.
measure() {
  local label=$1
  shift
  prepare_cache
  /usr/bin/time -f "%e %U %S" -o "$OUT/time.txt" "$@"
  read -r wall user sys < "$OUT/time.txt"
  echo "{\"what\": \"$label\", \"page_cache\": \"$cache\", \"bytes\": $bytes, \"wall_s\": $wall, \"user_s\": $user, \"sys_s\": $sys, \"GBps\": $(awk -v b="$bytes" -v s="$wall" 'BEGIN { printf "%.3f", b / s / 1e9 }')}"
}
measure "iris merge" "$IRIS" merge "$@" -o "$OUT/merged.iris" -q --force
measure "cat parts > file; sync file" sh -c 'cat "$@" > "$0" && sync "$0"' "$OUT/copied.bin" "$@"
rm -f "$OUT/copied.bin"
[ "$cache" = parts-cached ] || measure "cat parts > /dev/null" sh -c 'cat "$@" > /dev/null' sh "$@"
measure "dd of=file oflag=direct (zeros)" dd if=/dev/zero of="$OUT/direct.bin" bs=16M count=$(( (bytes + 16777215) / 16777216 )) oflag=direct status=none
echo "{\"cpu\": \"$(lscpu | sed -n 's/^Model name: *//p' | head -1)\", \"cores\": $(nproc), \"filesystem\": \"$(df -T "$OUT" | awk 'NR == 2 { print $2 }')\"}"
