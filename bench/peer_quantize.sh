#!/usr/bin/env bash
# iris convert --quant against llama-quantize on the same BF16 weights, side by side (issue 12).
#
#   LLAMA_QUANTIZE=/path/to/llama-quantize bash bench/peer_quantize.sh [BUILD=build] [ROUNDS=5] [WORK=/tmp/iris-peer]
#
# The peer is built from llama.cpp's public source beside the project, never in it (for example
# `cmake -B build -DCMAKE_BUILD_TYPE=Release && cmake --build build --target llama-quantize`).
# The weights: the 1.83 GB Llama-shaped BF16 snapshot of `iris_make_snapshot SNAP 2 2`, and the
# same bytes as a BF16 GGUF (bench/snapshot_to_gguf.py). Both sides keep the embedding and
# lm_head in BF16 (iris' default; the peer's --token-embedding-type/--output-tensor-type bf16),
# both run on every core (the peer's thread count = nproc), and each run writes a new file.
# Pairs: iris --quant mxfp4 / MXFP4_MOE --pure (every other matrix MXFP4: on a dense model the
# peer's MXFP4_MOE makes them Q8_0 otherwise), fp8-block / Q8_0, nf4 / Q4_K_M. The peer does not
# fsync its output and iris does: the peer is timed alone and with `sync FILE` after it.
# Prints, per pair, the median wall seconds of ROUNDS interleaved rounds (/usr/bin/time %e).
# COLD=1 drops the page cache before every run (root: /proc/sys/vm/drop_caches), so each side
# reads its input from the disk, as a first conversion does. IRIS_CPU_PATH=avx2 (or portable)
# holds iris to that vector path, so an AVX-512 machine measures what an AVX2-only one runs; the
# peer is then built without AVX-512 too (-DGGML_NATIVE=OFF -DGGML_AVX512=OFF, AVX2/FMA/F16C on).
set -euo pipefail
cd "$(dirname "$0")/.."
B=${1:-build}
ROUNDS=${2:-5}
W=${3:-/tmp/iris-peer}
Q=${LLAMA_QUANTIZE:?set LLAMA_QUANTIZE to a llama-quantize built from llama.cpp\'s public source}
IRIS="$B/converter/iris"
T=$(nproc)
mkdir -p "$W/out"
[ -d "$W/snap" ] || "$B/bench/iris_make_snapshot" "$W/snap" 2 2 >/dev/null
[ -f "$W/snap.gguf" ] || python3 bench/snapshot_to_gguf.py "$W/snap" "$W/snap.gguf"
bf16_bytes=$(du -sb "$W/snap" | cut -f1)

timed() {  # LABEL COMMAND...: one run, appends "LABEL seconds" to $W/times.txt
  local label=$1
  shift
  if [ "${COLD:-0}" = 1 ]; then sync; echo 3 >/proc/sys/vm/drop_caches; fi
  /usr/bin/time -f "%e" -o "$W/t.txt" "$@" >/dev/null 2>&1
  echo "$label $(cat "$W/t.txt")" >>"$W/times.txt"
  # Untimed: the output removed and the disk settled, so that no run pays for the previous
  # one's writeback or the freeing of its blocks (the peer leaves its file to the page cache).
  rm -f "$W"/out/*
  sync
}
: >"$W/times.txt"
for ((r = 0; r < ROUNDS; ++r)); do
  for pair in "mxfp4 MXFP4_MOE --pure" "fp8-block Q8_0" "nf4 Q4_K_M"; do
    set -- $pair
    iq=$1 pq=$2 extra=${3:-}
    timed "iris:$iq" "$IRIS" convert "$W/snap" -o "$W/out/i$r.iris" --quant "$iq" -q
    timed "peer:$pq" "$Q" $extra --token-embedding-type bf16 --output-tensor-type bf16 "$W/snap.gguf" "$W/out/p$r.gguf" "$pq" "$T"
    timed "peer+sync:$pq" sh -c "\"$Q\" $extra --token-embedding-type bf16 --output-tensor-type bf16 \"$W/snap.gguf\" \"$W/out/s$r.gguf\" $pq $T && sync \"$W/out/s$r.gguf\""
  done
done
python3 - "$W/times.txt" "$bf16_bytes" <<'PY'
import os, platform, statistics, sys
times = {}
for line in open(sys.argv[1]):
    label, s = line.split()
    times.setdefault(label, []).append(float(s))
gb = int(sys.argv[2]) / 1e9
med = {k: statistics.median(v) for k, v in times.items()}
flags = next((l.split(":", 1)[1].split() for l in open("/proc/cpuinfo") if l.startswith("flags")), [])
model = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), platform.processor())
print(f"CPU: {model}, {os.cpu_count()} threads, {'AVX-512' if 'avx512f' in flags else 'AVX2' if 'avx2' in flags else 'no AVX2'}; "
      f"iris path: {os.environ.get('IRIS_CPU_PATH', 'best')}; page cache {'dropped before each run' if os.environ.get('COLD') == '1' else 'warm'}")
print(f"BF16 input: {gb:.2f} GB; medians of {len(next(iter(times.values())))} rounds (min-max)")
print("| iris | s | GB/s | peer | s | +sync s | peer+sync / iris |")
print("|---|---|---|---|---|---|---|")
for iq, pq in (("mxfp4", "MXFP4_MOE"), ("fp8-block", "Q8_0"), ("nf4", "Q4_K_M")):
    i, p, ps = med[f"iris:{iq}"], med[f"peer:{pq}"], med[f"peer+sync:{pq}"]
    rng = lambda k: f"{min(times[k]):.2f}-{max(times[k]):.2f}"
    print(f"| --quant {iq} | {i:.2f} ({rng('iris:' + iq)}) | {gb / i:.2f} | {pq} | {p:.2f} ({rng('peer:' + pq)}) | {ps:.2f} | {ps / i:.2f}x |")
PY
