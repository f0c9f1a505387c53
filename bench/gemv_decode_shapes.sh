#!/usr/bin/env bash
# The GEMV at the shapes a decode step runs (Llama-3-8B: q/o 4096x4096, k/v 1024x4096, gate/up
# 14336x4096, down 4096x14336; gpt-oss-20b experts 32x5760x2880 and 32x2880x2880), batch 1,
# under each launch variant the kernels take without a rebuild (unroll, warps; VARIANTS= to
# choose), so a per-shape choice can be read off one run. From the repository root on the GPU
# machine:
#   B=.device-bin bash bench/gemv_decode_shapes.sh > gemv_shapes.txt
set -uo pipefail
. bench/device_env.sh
cases=()
# FORMATS= picks the formats (default "mxfp4 nf4 fp8"; fp8 is FP8 with 128x128 block scales,
# fp8-channel with row scales), SHAPES= the shapes (default: all six above).
for fmt in ${FORMATS:-mxfp4 nf4 fp8}; do
  for shape in ${SHAPES:-4096x4096 1024x4096 14336x4096 4096x14336 32x5760x2880 32x2880x2880}; do cases+=(--synthetic "$fmt:$shape"); done
done
# A list entry may name several variants joined by commas (gemv-prefetch=on,gemv-probe=skip-decode).
# BATCH= picks the batch (default 1).
for v in ${VARIANTS:-default gemv-unroll=1 gemv-unroll=2 gemv-prefetch=on gemv-warps=4 gemv-warps=8}; do
  echo "== variant $v =="
  flags=()
  if [ "$v" != default ]; then IFS=, read -ra vs <<< "$v"; for one in "${vs[@]}"; do flags+=(--variant "$one"); done; fi
  "$B/iris" bench "${cases[@]}" --batch "${BATCH:-1}" --replays 100 "${flags[@]}"
done
