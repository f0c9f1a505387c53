#!/usr/bin/env bash
# The full release build (every GPU target of cmake/cuda_gencode.cmake's release list, the
# tests and the benchmarks) from a clean build folder, timed, with each build step's elapsed
# seconds in the log: the 16-core figure of docs/BENCHMARKS.md ("The first build"). From the
# repository root on the GPU machine (16 cores; its Ubuntu has no libxxhash-dev, so xxHash's
# header and library travel in .deps/xxhash: carry it), or anywhere:
#
#   bash bench/release_build.sh [JOBS]      # writes $OUT/release-build.log
set -uo pipefail
OUT=${OUT:-/tmp/iris-release-build}
mkdir -p "$OUT"
jobs=${1:-$(nproc)}
dir=$(mktemp -d)/build-release
prefix=()
[ -d .deps/xxhash ] && prefix=(-DCMAKE_PREFIX_PATH="$PWD/.deps/xxhash")
start=$(date +%s%N)
cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DIRIS_CUDA=ON "${prefix[@]}" > "$OUT/release-configure.log" 2>&1 || { tail -n 20 "$OUT/release-configure.log"; exit 1; }
NINJA_STATUS="[%f/%t %es] " cmake --build "$dir" -j "$jobs" > "$OUT/release-build.log" 2>&1
rc=$?
end=$(date +%s%N)
echo "release build, $jobs jobs on $(nproc) cores: exit $rc, $(( (end - start) / 1000000 )) ms wall (configure included), targets: $(grep -m1 'CUDA targets' "$OUT/release-configure.log")" | tee -a "$OUT/release-build.log"
# The kernel files that finished last: the build's critical path.
grep -E "Building CUDA object" "$OUT/release-build.log" | tail -n 5
rm -rf "$(dirname "$dir")"
exit $rc
