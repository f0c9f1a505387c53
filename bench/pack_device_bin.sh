#!/usr/bin/env bash
# Packs the static GPU-machine build (build-device, see bench/gpu_run.sh) into .device-bin:
# the binaries gzipped (a device run carries at most 64 MiB), libiris.so.1, and the C example
# cuda_gemv built here against that library and the static CUDA runtime.
set -euo pipefail
cd "$(dirname "$0")/.."
D=build-device
mkdir -p .device-bin
rm -f .device-bin/*
for f in converter/iris tests/kernels/kernels_tests tests/api/api_tests tests/api/api_cuda_tests bench/iris_upload_bench bench/iris_make_snapshot; do
  gzip -c "$D/$f" > ".device-bin/$(basename "$f").gz"
done
# The kernel cases from the PTX-only builds (build-ptx: compute_75 + compute_80, the driver
# compiles compute_80 on a Hopper card; build-ptx75: compute_75 alone, the Turing paths),
# where they were built: bench/gpu_run.sh runs each.
for p in ptx ptx75; do
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
