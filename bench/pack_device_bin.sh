#!/usr/bin/env bash
# Packs the static GPU-machine build (build-device, see bench/gpu_run.sh) into .device-bin:
# the binaries gzipped (a device run carries at most 64 MiB), libiris.so.1, and the C example
# cuda_gemv built here against that library and the static CUDA runtime.
#
# D= packs another build; BINS= names the binaries (paths in the build, default all six below).
# For a session on the H100/H200 machines alone, a build for sm_90a only (4 min 29 s from an
# empty folder on 2 cores, `time cmake --build`, 2026-11-27) travels with the tree in one device
# call, under its 64 MiB, if not every test binary comes along. Measured 2026-11-28 (`gzip -c F
# | wc -c`): iris 10.6 MB, kernels_tests 10.7, api_cuda_tests 9.4, libiris 10.4, the snapshot
# maker 1.6, with the tree's tracked files 25.8 MB (`git ls-files | xargs cat | wc -c`): all
# five are 68.6 MB, over the limit, so a call takes api_cuda_tests or what a decode needs:
#   cmake -S . -B build-h100 -G Ninja -DIRIS_CUDA=ON -DIRIS_STATIC=ON -DIRIS_KERNEL_PROBES=ON -DIRIS_CUDA_GENCODE=sm_90a
#   cmake --build build-h100 --target iris libiris iris_make_snapshot kernels_tests api_cuda_tests
#   BINS="converter/iris tests/kernels/kernels_tests bench/iris_make_snapshot" D=build-h100 PTX_BUILDS= bash bench/pack_device_bin.sh
# Binaries the build did not make are left out, saying so.
set -euo pipefail
cd "$(dirname "$0")/.."
D=${D:-build-device}
mkdir -p .device-bin
rm -f .device-bin/*
for f in ${BINS:-converter/iris tests/kernels/kernels_tests tests/api/api_tests tests/api/api_cuda_tests bench/iris_upload_bench bench/iris_make_snapshot}; do
  if [ ! -x "$D/$f" ]; then echo "pack_device_bin: $D/$f not built: left out" >&2; continue; fi
  gzip -c "$D/$f" > ".device-bin/$(basename "$f").gz"
done
# The kernel cases from the PTX-only builds (build-ptx: compute_75 + compute_80, the driver
# compiles compute_80 on a Hopper card; build-ptx75: compute_75 alone, the Turing paths),
# where they were built: bench/gpu_run.sh runs each. PTX_BUILDS= (empty) leaves them out.
for p in ${PTX_BUILDS-ptx ptx75}; do
  [ -x "build-$p/tests/kernels/kernels_tests" ] && gzip -c "build-$p/tests/kernels/kernels_tests" > ".device-bin/kernels_tests_$p.gz"
done
cp -L "$D/api/libiris.so.1" .device-bin/libiris.so.1
cc -O2 examples/cuda_gemv.c -Iinclude -I/usr/local/cuda/include -o .device-bin/cuda_gemv \
  -L.device-bin -l:libiris.so.1 -Wl,-rpath,'$ORIGIN' -L/usr/local/cuda/lib64 -l:libcudart_static.a -ldl -lrt -lpthread -lm
gzip -f .device-bin/cuda_gemv
# (libiris needs no OpenMP runtime: common/parallel_for.h; the executables link libgomp.a.)
gzip -f .device-bin/libiris.so.1
chmod +x .device-bin/* 2>/dev/null || true
du -sh .device-bin
