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
IRIS_TEST_DATA_DIR="$PWD/tests/data" qemu-aarch64 -L /usr/aarch64-linux-gnu "$B/tests/quant/iris_quant_tests" --gtest_brief=1
