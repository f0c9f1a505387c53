#!/usr/bin/env bash
# End-to-end `convert --quant` against copying the same files, page cache warm.
#   bash bench/convert_quant_vs_cp.sh [TOTAL_GB=2] [WORK_DIR=/tmp/iris-bench]
# For each target: median wall seconds and peak RSS of RUNS conversions (GNU time), against
# the median of `cp -r` and of `cp -r && sync` (convert fsyncs its output). Needs ./build.
set -euo pipefail
cd "$(dirname "$0")/.."
gb=${1:-2}; work=${2:-/tmp/iris-bench}; runs=${RUNS:-3}
iris=build/converter/iris; make=build/bench/iris_make_snapshot
mkdir -p "$work"
[ -f "$work/snap/model.safetensors.index.json" ] || "$make" "$work/snap" "$gb" 1
cat "$work"/snap/*.safetensors > /dev/null
t() { /usr/bin/time -f "%e %M" "$@" 2>&1 >/dev/null | tail -n 1; }
med() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
cp_t=(); cs_t=()
for i in $(seq "$runs"); do
  rm -rf "$work/copy"; sync
  read -r s m < <(t cp -r "$work/snap" "$work/copy"); cp_t+=("$s"); rm -rf "$work/copy"; sync
  read -r s m < <(t sh -c "cp -r '$work/snap' '$work/copy' && sync"); cs_t+=("$s"); rm -rf "$work/copy"; sync
done
mc=$(med "${cp_t[@]}"); ms=$(med "${cs_t[@]}")
bytes=$(du -cb "$work"/snap/*.safetensors | tail -n1 | cut -f1)
echo "source $(awk -v b="$bytes" 'BEGIN{printf "%.2f", b/1e9}') GB; cp median $mc s; cp+sync median $ms s"
for q in ${TARGETS:-mxfp4 nf4 fp8 fp8-channel fp8-block}; do
  ts=(); ms_=()
  for i in $(seq "$runs"); do
    rm -f "$work/q.iris"; sync
    read -r s m < <(t "$iris" convert "$work/snap" -o "$work/q.iris" --quant "$q" -q); ts+=("$s"); ms_+=("$m")
  done
  mv=$(med "${ts[@]}")
  echo "$q: median $mv s, $(awk -v b="$bytes" -v s="$mv" 'BEGIN{printf "%.2f", b/s/1e9}') GB/s of BF16," \
       "$(awk -v a="$mv" -v b="$mc" 'BEGIN{printf "%.1f", a/b}')x cp, $(awk -v a="$mv" -v b="$ms" 'BEGIN{printf "%.1f", a/b}')x cp+sync," \
       "peak RSS $(med "${ms_[@]}") KB"
done
rm -f "$work/q.iris"
