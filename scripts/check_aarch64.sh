#!/usr/bin/env bash
# The codecs (quant/), the archive format (formats/) and common/ on 64-bit Arm, under
# emulation: cross-compiled with Debian's g++-aarch64-linux-gnu
# (cmake/toolchains/aarch64-linux-gnu.cmake) and their test suites run with qemu-user. There no
# x86 path exists: every codec loop takes its portable code, which the compiler vectorises for
# NEON, and the tests hold it to the same oracles and fixtures as on x86. `run.sh test` (CI)
# runs it after the native suites.
#   bash scripts/check_aarch64.sh [BUILD_DIR=build-aarch64]     (JOBS: parallel jobs)
# Needs (Debian, as root): g++-aarch64-linux-gnu qemu-user, and after
# `dpkg --add-architecture arm64 && apt-get update`: libzstd-dev:arm64 libxxhash-dev:arm64 libgtest-dev:arm64.
# Exits 77, saying why, where they are missing.
set -euo pipefail
cd "$(dirname "$0")/.."
B=${1:-build-aarch64}
JOBS=${JOBS:-$(nproc)}
for tool in aarch64-linux-gnu-g++ qemu-aarch64; do
  command -v "$tool" >/dev/null || { echo "aarch64 check skipped: $tool is not installed" >&2; exit 77; }
done
[ -e /usr/lib/aarch64-linux-gnu/libzstd.a ] || { echo "aarch64 check skipped: the arm64 -dev packages are not installed" >&2; exit 77; }
# Static executables (the toolchain file says why), so the dependencies' static libraries.
cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/aarch64-linux-gnu.cmake \
  -DIRIS_CUDA=OFF -DIRIS_BUILD_BENCH=OFF -DIRIS_STATIC=ON >/dev/null
cmake --build "$B" -j "$JOBS" --target iris_quant_tests common_tests formats_tests
# The quant suite is registered three times on x86 (IRIS_CPU_PATH=avx2 and portable narrow the
# path); on Arm every registration runs the portable loops, so once is enough. Two tests count
# the process's threads in /proc/self/task after a join: under qemu-user a joined thread was
# still listed after the join returned (inferred: qemu, not the kernel, clears the thread id
# the join waits on), so they cannot hold there; the main build runs them natively.
not_under_qemu='ParallelFor\.NoThreadOutlivesTheCall|ThreadTeam\.EveryMemberEveryStepThenJoined'
ctest --test-dir "$B" -L '^(quant|common_tests|formats_tests)$' -E "^(quant\.(avx2|portable)\..*|$not_under_qemu)\$" -j "$JOBS" \
  --timeout 900 --output-on-failure
