#!/usr/bin/env bash
# The codecs on 64-bit Arm, under emulation: cross-compiles iris_quant and its tests with
# Debian's g++-aarch64-linux-gnu (cmake/toolchains/aarch64-linux-gnu.cmake) and runs them
# with qemu-user. There no x86 path exists: every loop takes its portable code, which the
# compiler vectorises for NEON; the tests hold it to the same oracles and fixtures.
#   bash scripts/check_aarch64.sh [BUILD_DIR=build-aarch64]
# Needs (Debian, as root): g++-aarch64-linux-gnu qemu-user, and after
# `dpkg --add-architecture arm64 && apt-get update`: libzstd-dev:arm64 libxxhash-dev:arm64 libgtest-dev:arm64.
set -euo pipefail
cd "$(dirname "$0")/.."
B=${1:-build-aarch64}
cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release -DIRIS_CUDA=OFF -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/aarch64-linux-gnu.cmake >/dev/null
cmake --build "$B" --target iris_quant_tests
# Under one CPU (taskset) the codec loops stay on the calling thread, and the tests that start
# threads of their own (*Thread*) are left out: qemu-user 7.2 (Debian 12) hangs in the guest's
# pthread_create -- an emulator fault, reproduced with a bare std::thread program -- so
# threading is tested natively, not here. 53 tests in about a minute on one core.
IRIS_TEST_DATA_DIR="$PWD/tests/data" taskset -c 0 qemu-aarch64 -L /usr/aarch64-linux-gnu "$B/tests/quant/iris_quant_tests" \
  --gtest_brief=1 --gtest_filter='-*Thread*'
