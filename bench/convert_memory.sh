#!/usr/bin/env bash
# Peak RSS of `iris convert --quant T` from every source kind, at two model sizes (issue 12):
# the bound is 2x the largest tensor + 256 MiB, flat in the model size.
#
#   bash bench/convert_memory.sh [BUILD=build] [SIZES_GB="1 3"] [WORK=/tmp/iris-mem]
#
# Sources: a Llama-shaped BF16 snapshot from iris_make_snapshot (largest tensor: the
# 32000x4096 embedding, 262 MB in BF16), and the same weights as NF4, MXFP4 and FP8-block
# Hugging Face folders (iris convert --quant, then iris export -o DIR/). Prints one JSON line
# per conversion: source kind, size, target, seconds, peak RSS (MB, from /usr/bin/time).
set -euo pipefail
cd "$(dirname "$0")/.."
B=${1:-build}
SIZES=${SIZES_GB:-1 3}
W=${WORK:-/tmp/iris-mem}
IRIS="$B/converter/iris"
mkdir -p "$W"
for gb in $SIZES; do
  S="$W/bf16-$gb"
  [ -d "$S" ] || "$B/bench/iris_make_snapshot" "$S" "$gb" 1 >/dev/null
  for q in nf4 mxfp4 fp8-block; do
    [ -d "$W/$q-$gb" ] || { "$IRIS" convert "$S" -o "$W/tmp.iris" --quant "$q" -q --force && "$IRIS" export "$W/tmp.iris" -o "$W/$q-$gb/" -q && rm -f "$W/tmp.iris"; }
  done
  for src in bf16 nf4 mxfp4 fp8-block; do
    bytes=$(du -sb "$W/$src-$gb" | cut -f1)
    for t in nf4 mxfp4 fp8-block; do
      sync
      /usr/bin/time -f "%e %M" -o "$W/time.txt" "$IRIS" convert "$W/$src-$gb" -o "$W/out.iris" --quant "$t" -q --force
      read -r secs kb < "$W/time.txt"
      printf '{"source": "%s", "source_gb": %.2f, "target": "%s", "seconds": %s, "peak_rss_mb": %.0f}\n' \
        "$src" "$(echo "$bytes / 1000000000" | bc -l)" "$t" "$secs" "$(echo "$kb / 1024" | bc -l)"
      rm -f "$W/out.iris"
    done
  done
done
