#!/usr/bin/env bash
# Runs one libFuzzer target for a bounded time from its committed corpus; fails on any crash,
# leak, timeout or sanitizer report (libFuzzer exits non-zero and leaves the input beside it).
#   bash tests/fuzz/run_fuzz.sh FUZZER CORPUS_DIR [SECONDS]    (what ctest runs)
#   bash tests/fuzz/run_fuzz.sh --merge FUZZER CORPUS_DIR SCRATCH_DIR
#        keeps in CORPUS_DIR the inputs of SCRATCH_DIR that add coverage (to commit)
set -uo pipefail
if [ "${1:-}" = --merge ]; then
  exec "$2" -merge=1 "$3" "$4"
fi
fuzzer=$(realpath "$1") corpus=$(realpath "$2") seconds=${3:-60}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"  # crash-* files land here; the log names them
"$fuzzer" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=20 -max_len=65536 -print_final_stats=1 \
  "$work" "$corpus" > "$work/log" 2>&1
rc=$?
tail -n 25 "$work/log"
if [ $rc -ne 0 ]; then
  for f in "$work"/crash-* "$work"/leak-* "$work"/timeout-* "$work"/oom-*; do
    [ -e "$f" ] && { echo "reproducer ($f), base64:"; base64 -w0 "$f" | head -c 4000; echo; }
  done
fi
exit $rc
