#!/usr/bin/env bash
# Opening big manifests (issue 24 items 5 and 10): wall time and peak RSS of the commands that
# read a whole manifest, on a snapshot of 10^6 tensors and an archive of 36,096.
#
#   bash bench/manifest_scale.sh [BUILD=build] [WORK=/tmp/iris-manifest] [TENSORS=1000000]
#
# Inputs (made once, kept in WORK):
#   snap1m/   one model.safetensors of TENSORS one-element BF16 expert tensors (~98 MB header)
#   snap36k/  one model.safetensors of 36,096 [32, 64] BF16 expert tensors (Qwen3-235B-A22B's
#             expert count), converted to a36k.iris with every w2 in MXFP4 and every w3 of
#             experts 0-9 in FP8 block (so the manifest holds params of both kinds)
# Prints one line per measurement: what, seconds, peak RSS in MB (GNU time), and the C API's
# median open+close over 5 runs. The CPU is named first: quote it with every figure.
set -euo pipefail
cd "$(dirname "$0")/.."
B=${1:-build}
W=${2:-/tmp/iris-manifest}
N=${3:-1000000}
IRIS="$B/converter/iris"
mkdir -p "$W"
echo "cpu: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores, flags: $(grep -o 'avx[0-9a-z_]*' /proc/cpuinfo | sort -u | tr '\n' ' ')"
echo "commit: $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . || echo ' (modified)')"

[ -f "$W/snap1m/model.safetensors" ] || python3 bench/make_manifest_snapshot.py "$W/snap1m" "$N"
[ -f "$W/snap36k/model.safetensors" ] || python3 bench/make_manifest_snapshot.py "$W/snap36k" 36096 32 64
[ -f "$W/a36k.iris" ] || "$IRIS" convert "$W/snap36k" -o "$W/a36k.iris" -q \
  --rule '\.w2\.weight$=mxfp4' --rule '\.experts\.[0-9]\.w3\.weight$=fp8-block'

measure() {  # WHAT CMD...: wall seconds and peak RSS, output discarded
  local what=$1
  shift
  /usr/bin/time -f "%e %M" -o "$W/time.txt" "$@" >/dev/null 2>"$W/stderr.txt" || {
    echo "$what: failed (exit $?): $(tail -c 300 "$W/stderr.txt")"
    return 0
  }
  read -r secs kb <"$W/time.txt"
  printf '%-40s %8.2f s %8.0f MB\n' "$what" "$secs" "$(echo "$kb / 1024" | bc -l)"
}

measure "inspect a36k.iris" "$IRIS" inspect "$W/a36k.iris"
measure "inspect --json a36k.iris" "$IRIS" inspect --json "$W/a36k.iris"
measure "verify a36k.iris" "$IRIS" verify "$W/a36k.iris"
"$B/bench/iris_archive_open_bench" "$W/a36k.iris" 5 | tail -1 | sed 's/^/C API a36k.iris: /'
measure "inspect snap1m" "$IRIS" inspect "$W/snap1m"
measure "inspect --json snap1m" "$IRIS" inspect --json "$W/snap1m"
measure "convert --dry-run snap1m" "$IRIS" convert "$W/snap1m" -o "$W/x.iris" --dry-run -q  # prints the plan: 10^6 lines
