#!/usr/bin/env bash
# The project's one entry point, used by the README quick start and by CI.
#   bash scripts/run.sh demo   install what is missing, build, convert + verify the bundled snapshot
#   bash scripts/run.sh test   install what is missing, build, run the whole test suite; then build
#                              it again with clang + AddressSanitizer + UBSan (build-check) and run
#                              it there with the libFuzzer targets (30 s each); then the codecs',
#                              the format's and common/'s suites built for aarch64, under qemu
#   bash scripts/run.sh python install what is missing, build, and pip-install the Python package
#                              (with libiris beside it) into the virtual environment build/venv;
#                              libiris is built with IRIS_STATIC=ON in build-python (BUILD_DIR
#                              overrides), so the wheel needs nothing of the system but glibc
# Environment: BUILD_DIR (default build), IRIS_CUDA (AUTO|ON|OFF, default AUTO), JOBS,
#              CHECK_DIR (default build-check), ARM_DIR (default build-aarch64), FUZZ_SECONDS (default 15).
set -euo pipefail
cd "$(dirname "$0")/.."

mode=${1:-}
case "$mode" in demo|test|build|python) ;; *) echo "usage: bash scripts/run.sh demo|test|build|python" >&2; exit 2;; esac

default_build=build; [ "$mode" = python ] && default_build=build-python
BUILD_DIR=${BUILD_DIR:-$default_build}
JOBS=${JOBS:-$(nproc)}

# 1. Debian packages the build needs; only the missing ones are installed.
packages=(cmake ninja-build g++ pkg-config nlohmann-json3-dev libcli11-dev libzstd-dev libxxhash-dev
          libgtest-dev libgmock-dev libomp-dev python3 python3-pip python3-setuptools
          python3-numpy python3-pytest python3-xxhash python3-zstandard)
# The sanitizer and fuzz build of `test`: clang with its sanitizer and libFuzzer runtimes.
[ "$mode" = test ] && packages+=(clang libclang-rt-dev python3-yaml)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}" >&2
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# `test` also runs the Slurm example on a one-node cluster of Debian's Slurm and munge
# (examples/slurm/local_slurm_test.sh); where they cannot be installed, that test skips and says so.
if [ "$mode" = test ]; then
  slurm_missing=()
  for p in slurmctld slurmd slurm-client munge; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || slurm_missing+=("$p")
  done
  if [ ${#slurm_missing[@]} -gt 0 ]; then
    echo "installing: ${slurm_missing[*]}" >&2
    { $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${slurm_missing[@]}"; } >/dev/null 2>&1 ||
      echo "could not install ${slurm_missing[*]}: the Slurm example test will skip" >&2
  fi
fi

# `test` also builds the codecs, the format and common/ for aarch64 and runs their tests under
# qemu (scripts/check_aarch64.sh): a cross compiler, qemu-user and the arm64 -dev packages
# (Debian multiarch). Where they cannot be installed, that stage skips and says so.
if [ "$mode" = test ]; then
  arm_packages=(g++-aarch64-linux-gnu qemu-user libzstd-dev:arm64 libxxhash-dev:arm64 libgtest-dev:arm64)
  arm_missing=()
  for p in "${arm_packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || arm_missing+=("$p")
  done
  if [ ${#arm_missing[@]} -gt 0 ]; then
    echo "installing: ${arm_missing[*]}" >&2
    { dpkg --print-foreign-architectures | grep -qx arm64 || $sudo dpkg --add-architecture arm64; } &&
      { $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${arm_missing[@]}"; } >/dev/null 2>&1 ||
      echo "could not install ${arm_missing[*]}: the aarch64 stage will skip" >&2
  fi
fi

# 2. Configure and build (CUDA kernels too when nvcc is at /usr/local/cuda or on PATH). GPU
# targets: with a GPU here, this machine's own ("native": the fastest build, kernels that match
# the card); without one, `python` (an install, carried elsewhere) gets the full release list
# (cmake/cuda_gencode.cmake) and the others sm_90a plus compute_75 PTX, which compile both
# ends of kernels/arch.cuh (Hopper's instructions, Turing's fallbacks) in a fraction of the
# time: nothing runs a kernel here. IRIS_CUDA_GENCODE overrides; `iris --version` says which.
# The demo on a machine without a GPU runs no kernel: it builds without them (1 min 57 s against
# 8 min 47 s for the whole demo on 2 cores, docs/BENCHMARKS.md) unless IRIS_CUDA says otherwise.
cuda=${IRIS_CUDA:-AUTO}
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then gencode=native
elif [ "$mode" = python ]; then gencode=release
else
  gencode="sm_90a;compute_75"
  if [ "$mode" = demo ] && [ -z "${IRIS_CUDA:-}" ]; then
    cuda=OFF
    echo "no GPU here: the demo builds iris without its CUDA kernels (IRIS_CUDA=ON bash scripts/run.sh demo builds them)" >&2
  fi
fi
# The Python package's libiris travels in a wheel: linked statically against its C++ runtime,
# zstd and xxHash, it needs only glibc where it lands.
static=OFF; [ "$mode" = python ] && static=ON
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DIRIS_CUDA="$cuda" -DIRIS_STATIC="$static" \
  -DIRIS_CUDA_GENCODE="${IRIS_CUDA_GENCODE:-$gencode}" >/dev/null
# The demo builds what it runs (the iris tool; no test suite), python the tool and libiris;
# the other modes everything.
targets=(); [ "$mode" = demo ] && targets=(--target iris)
[ "$mode" = python ] && targets=(--target iris --target libiris)
start=$(date +%s)
cmake --build "$BUILD_DIR" -j "$JOBS" "${targets[@]}"
echo "built in $(( $(date +%s) - start )) s: $BUILD_DIR/converter/iris ($("$BUILD_DIR/converter/iris" --version))" >&2

iris="$BUILD_DIR/converter/iris"
case "$mode" in
  build) ;;
  python)
    # The package and libiris in one venv that sees Debian's numpy (and torch, if installed).
    venv="$BUILD_DIR/venv"
    /usr/bin/python3 -m venv --system-site-packages --without-pip "$venv"
    src=$(mktemp -d); trap 'rm -rf "$src"' EXIT
    cp -r python/pyproject.toml python/README.md python/iris_archive python/_build "$src/"
    cp -L "$BUILD_DIR/api/libiris.so.1" "$src/iris_archive/"
    /usr/bin/python3 -m pip --python "$venv/bin/python" install --quiet --no-deps --no-index "$src"
    "$venv/bin/python" -c 'import iris_archive as iris; print("iris_archive", iris.__version__, "with", iris.native_library())'
    # What the bundled libiris needs of the system: glibc alone (libc, libm, the loader).
    needs=$(ldd "$src/iris_archive/libiris.so.1" | awk '$1 !~ /^(linux-vdso|libc\.|libm\.|\/lib64\/ld-linux|ld-linux)/ {print $1}')
    if [ -n "$needs" ]; then echo "the bundled libiris needs more than glibc: $needs" >&2; exit 1; fi
    echo "use it with: $venv/bin/python"
    ;;
  demo)
    # 3. The main job on the bundled gpt-oss-style snapshot (MXFP4 experts + BF16 rest).
    out="$BUILD_DIR/demo"; mkdir -p "$out"
    "$iris" convert tests/data/fixtures/gptoss-mxfp4 -o "$out/gptoss-mxfp4.iris" --force
    "$iris" inspect "$out/gptoss-mxfp4.iris" | tail -n 3
    device=cpu
    if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 && "$iris" verify --help | grep -q cuda; then device=cuda; fi
    "$iris" verify "$out/gptoss-mxfp4.iris" --device "$device"
    ;;
  test)
    # 4. Every test, then the same suite built with clang + ASan + UBSan (_GLIBCXX_ASSERTIONS
    #    too) plus the libFuzzer targets, each fuzzed for FUZZ_SECONDS from its corpus (15 s: at
    #    60, six targets of 62 s each on 2 cores were about 3 of a 32-minute CI run's minutes, by
    #    its build-check/ctest.log; at 30 a clean-clone `time bash .ci/run` took 31.4 minutes on
    #    2026-11-29, and at 15 31.9, the builds' own time moving by 1.5-3 minutes between runs;
    #    longer runs are for a fuzzing session, FUZZ_SECONDS=600). ctest
    #    lists the tests that skipped (the GPU ones, without a GPU) after its summary, so the
    #    summary lines are repeated last, the failing one (if any) at the very end. Under the
    #    sanitizer the tests that repeat whole conversions over many inputs take every other one
    #    (tests/sanitizer_scale.h; the main build takes all).
    set +e
    ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$JOBS" --timeout 600 2>&1 | tee "$BUILD_DIR/ctest.log"
    status=${PIPESTATUS[0]}
    CHECK_DIR=${CHECK_DIR:-build-check}
    # -O1: sanitizer builds at -O3 took twice as long to compile for little more coverage.
    cmake -S . -B "$CHECK_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_FLAGS_RELEASE=-O1 -DCMAKE_CXX_FLAGS_RELEASE=-O1 \
      -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
      -DIRIS_CUDA=OFF -DIRIS_SANITIZE=ON -DIRIS_FUZZ=ON -DIRIS_BUILD_BENCH=OFF -DIRIS_FUZZ_SECONDS="${FUZZ_SECONDS:-15}" >/dev/null &&
      cmake --build "$CHECK_DIR" -j "$JOBS"
    build_status=$?
    check_status=$build_status
    if [ $build_status -eq 0 ]; then
      ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
      LSAN_OPTIONS=suppressions="$PWD/tests/lsan.supp" \
        ctest --test-dir "$CHECK_DIR" --output-on-failure -j "$JOBS" --timeout 900 2>&1 | tee "$CHECK_DIR/ctest.log"
      check_status=${PIPESTATUS[0]}
    else
      echo "the sanitizer build failed" > "$CHECK_DIR/ctest.log"
    fi
    # 5. The codecs, the format and common/ for aarch64, under qemu.
    ARM_DIR=${ARM_DIR:-build-aarch64}
    mkdir -p "$ARM_DIR"
    bash scripts/check_aarch64.sh "$ARM_DIR" 2>&1 | tee "$ARM_DIR/check.log"
    arm_status=${PIPESTATUS[0]}
    set -e
    main_line=$(grep -E '^[0-9]+% tests passed' "$BUILD_DIR/ctest.log" | tail -n 1)
    check_line=$(grep -E '^[0-9]+% tests passed|sanitizer build failed' "$CHECK_DIR/ctest.log" | tail -n 1)
    # (|| true: a failed build leaves no such line, and set -e would end the script before the summary)
    arm_line=$(grep -E '^[0-9]+% tests passed|aarch64 check skipped' "$ARM_DIR/check.log" | tail -n 1 || true)
    [ -n "$arm_line" ] || arm_line="the aarch64 build failed"
    [ $arm_status -eq 77 ] && arm_status=0  # skipped, and the line says why
    echo "aarch64 (qemu) build: $arm_line"
    if [ $check_status -ne 0 ] || [ $status -eq 0 ]; then
      echo "main build: $main_line"; echo "sanitizer + fuzz build:"; echo "$check_line"
    else
      echo "sanitizer + fuzz build: $check_line"; echo "main build:"; echo "$main_line"
    fi
    if [ $arm_status -ne 0 ]; then echo "aarch64 (qemu) build:"; echo "$arm_line"; fi
    [ $status -eq 0 ] && [ $check_status -eq 0 ] && [ $arm_status -eq 0 ]
    exit $?
    ;;
esac
