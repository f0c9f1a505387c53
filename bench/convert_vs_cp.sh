#!/usr/bin/env bash
# Converting an unquantized snapshot vs copying its files, page cache warm.
#   bash bench/convert_vs_cp.sh [TOTAL_GB=2] [WORK_DIR=/tmp/iris-bench]
# Prints wall seconds and peak RSS (GNU time) for each of RUNS runs, then medians and the
# ratios. `convert` fsyncs its output before renaming it (durability is part of the contract),
# plain `cp` returns once the data is in the page cache, so `cp + sync` is measured too: it is
# the like-for-like durable copy. Needs a build in ./build (bash scripts/run.sh build).
# COLD=1 drops the page cache before every run instead (root: /proc/sys/vm/drop_caches), as a
# first conversion after a download would find it. BEFORE=path/to/iris adds that binary's
# convert, interleaved, for a before/after pair.
set -euo pipefail
cd "$(dirname "$0")/.."
gb=${1:-2}; work=${2:-/tmp/iris-bench}; runs=${RUNS:-5}
iris=build/converter/iris; make=build/bench/iris_make_snapshot
mkdir -p "$work"
[ -f "$work/snap/model.safetensors.index.json" ] || "$make" "$work/snap" "$gb" 1
cat "$work"/snap/*.safetensors > /dev/null   # warm the page cache
cold() { sync; if [ "${COLD:-0}" = 1 ]; then echo 3 > /proc/sys/vm/drop_caches; fi; }
t() { /usr/bin/time -f "%e %M" "$@" 2>&1 >/dev/null | tail -n 1; }
cp_t=(); cs_t=(); cv_t=(); cp_m=(); cv_m=(); bf_t=()
for i in $(seq "$runs"); do
  rm -rf "$work/copy" "$work/out.iris"; cold
  read -r s m < <(t cp -r "$work/snap" "$work/copy"); cp_t+=("$s"); cp_m+=("$m")
  rm -rf "$work/copy"; cold
  read -r s m < <(t sh -c "cp -r '$work/snap' '$work/copy' && sync"); cs_t+=("$s")
  rm -rf "$work/copy"; cold
  read -r s m < <(t "$iris" convert "$work/snap" -o "$work/out.iris" -q); cv_t+=("$s"); cv_m+=("$m")
  line="run $i: cp ${cp_t[-1]} s   cp+sync ${cs_t[-1]} s   convert ${cv_t[-1]} s (peak RSS ${cv_m[-1]} KB)"
  if [ -n "${BEFORE:-}" ]; then
    rm -rf "$work/out.iris"; cold
    read -r s m < <(t "$BEFORE" convert "$work/snap" -o "$work/out.iris" -q); bf_t+=("$s")
    line+="   before ${bf_t[-1]} s"
  fi
  echo "$line"
done
med() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
mc=$(med "${cp_t[@]}"); ms=$(med "${cs_t[@]}"); mv=$(med "${cv_t[@]}")
bytes=$(du -cb "$work"/snap/*.safetensors | tail -n1 | cut -f1)
largest_t=$(( 32000 * 4096 * 2 ))  # embed_tokens / lm_head of the synthetic snapshot
echo "median cp $mc s, cp+sync $ms s, convert $mv s; convert/cp $(awk -v a="$mv" -v b="$mc" 'BEGIN{printf "%.2f", a/b}')x," \
     "convert/(cp+sync) $(awk -v a="$mv" -v b="$ms" 'BEGIN{printf "%.2f", a/b}')x," \
     "convert $(awk -v b="$bytes" -v s="$mv" 'BEGIN{printf "%.2f", b/s/1e9}') GB/s," \
     "peak RSS convert $(med "${cv_m[@]}") KB; largest tensor $(( largest_t / 1024 )) KB" \
     "${BEFORE:+; before: convert $(med "${bf_t[@]}") s}"
rm -rf "$work/out.iris"
