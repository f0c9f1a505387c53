#!/usr/bin/env bash
# NVFP4 on the GPU machine, in one call (device time is short):
#  1. fixtures written by the producing tools themselves, whose public source travels in the
#     ignored .peer/toolsrc (never committed): ModelOpt's NVFP4QTensor
#     (tests/fixture_makers/modelopt_nvfp4.py) and compressed-tensors + llm-compressor's
#     nvfp4-pack-quantized (tests/fixture_makers/compressed_tensors_pack_quantized.py); both
#     need torch with float8_e4m3fn, which this machine has. Written under $OUT/fixtures to be
#     trimmed and committed (tests/fixture_makers/trim_fixture.py).
#  2. every NVFP4 archive put through `iris verify --device cuda`: those fixtures converted as
#     stored, `--quant nvfp4` of the BF16 Llama, and python/tests/test_nvfp4.py's synthetic
#     ModelOpt and compressed-tensors checkpoints (the GPU's dequantization against the CPU
#     reference bit for bit, its GEMV within the FP32 bound).
#  3. the kernel cases (tests/kernels: nvfp4 and nvfp4-ct among them), when carried.
#  4. the GEMV's speed: `iris bench` (CUDA graphs, the copy ceiling) against MXFP4, NF4 and
#     cuBLAS BF16 (bench/dense_bf16_bench.py) at real shapes.
#
#   device run (carry .device-bin .peer/toolsrc):  bash bench/nvfp4_gpu_session.sh [makers|verify|cases|pytests|bench|all]
set -uo pipefail
cd "$(dirname "$0")/.."
. bench/device_env.sh
OUT=${OUT:-/tmp/iris-nvfp4}
mkdir -p "$OUT/fixtures" "$OUT/refs" "$OUT/archives"
I="$PWD/$B/iris"
export PYTHONPATH="$PWD/python"
what=${1:-all}
rc=0
T=.peer/toolsrc
if [ "$what" = makers ] || [ "$what" = all ]; then
  python3 tests/fixture_makers/modelopt_nvfp4.py --tool-src "$T/modelopt" --out-fixtures "$OUT/fixtures" --out-refs "$OUT/refs" \
    > "$OUT/modelopt_maker.json" 2> "$OUT/modelopt_maker.err" || { rc=1; echo "FAIL modelopt maker: $(tail -c 1500 "$OUT/modelopt_maker.err")"; }
  python3 tests/fixture_makers/compressed_tensors_pack_quantized.py --tool-src "$T/ct" --llmc-src "$T/llmc" --tool-version 0.18.0 \
    --variants llama-ct-nvfp4a16,moe-ct-nvfp4a16 --fixtures-out "$OUT/fixtures" --refs-out "$OUT/refs" \
    > "$OUT/ct_maker.json" 2> "$OUT/ct_maker.err" || { rc=1; echo "FAIL compressed-tensors maker: $(tail -c 1500 "$OUT/ct_maker.err")"; }
  ls -la "$OUT/fixtures" "$OUT/refs"
fi
. bench/gpu_verify.sh
if [ "$what" = verify ] || [ "$what" = all ]; then
  for f in "$OUT"/fixtures/*nvfp4* tests/data/fixtures/*nvfp4*; do
    [ -d "$f" ] && convert_and_verify "$f"
  done
  "$I" convert tests/data/fixtures/llama-bf16 -o "$OUT/archives/llama-quant-nvfp4.iris" -q --force --quant nvfp4 || { rc=1; echo "FAIL --quant nvfp4"; }
  verify llama-quant-nvfp4 "$OUT/archives/llama-quant-nvfp4.iris"
  python3 - "$OUT/archives" <<'PY'
import sys
from pathlib import Path
sys.path.insert(0, "python/tests")
import test_nvfp4 as t
out = Path(sys.argv[1])
for name, make in sorted(t.CASES.items()):
    tensors, config, files, _ = make(n=200, k=1040)
    t.write_snapshot(out / ("snap-" + name), tensors, config, files)
PY
  for s in "$OUT"/archives/snap-*; do
    [ -d "$s" ] && convert_and_verify "$s"
  done
fi
if [ "$what" = cases ] || [ "$what" = all ]; then
  if [ -x "$B/kernels_tests" ]; then
    "$B/kernels_tests" --gtest_brief=1 > "$OUT/kernels_tests.log" 2>&1 || rc=1
    tail -5 "$OUT/kernels_tests.log"
  else
    echo "kernel cases: $B/kernels_tests not carried"
  fi
fi
if [ "$what" = pytests ] || [ "$what" = all ]; then
  # The Python package's NVFP4 tests against this build: the GPU ones (test_nvfp4_gpu.py; the
  # models' tokens against transformers patched with the same archive, nvfp4 cases) and the
  # CPU ones (test_nvfp4.py).
  IRIS_LIBRARY="$PWD/$B/libiris.so.1" python3 -m pytest -q -p no:cacheprovider python/tests/test_nvfp4_gpu.py python/tests/test_nvfp4.py \
    "python/tests/test_models_gpu.py::test_llama_tokens_equal_transformers" "python/tests/test_models_gpu.py::test_other_families_tokens_equal_transformers" \
    "python/tests/test_models_gpu.py::test_mixtral_gate_and_up_in_one_launch_change_no_bit" -k "nvfp4 or not models" 2>&1 | tail -15 || rc=1
fi
if [ "$what" = bench ] || [ "$what" = all ]; then
  # The kernels alone, each in a CUDA graph over rotating weights (iris bench: it also times the
  # card's copy ceiling), NVFP4 beside MXFP4 and NF4 on the same shapes, batch 1 and 4; then
  # cuBLAS BF16 on the same shapes in graphs (bench/dense_bf16_bench.py).
  shapes="14336x4096 4096x14336 4096x4096 6144x4096"
  args=()
  for s in $shapes; do args+=(--synthetic "nvfp4:$s" --synthetic "mxfp4:$s" --synthetic "nf4:$s"); done
  "$I" bench "${args[@]}" --batch 1,4 2>&1 | grep -v "^floor" | tee "$OUT/iris_bench.txt" || rc=1
  (cd bench && IRIS_LIBRARY=$PWD/../$B/libiris.so.1 PYTHONPATH=$PWD/../python python3 dense_bf16_bench.py --shapes "$(echo $shapes | tr ' ' ,)") \
    | tee "$OUT/cublas_bf16.jsonl" || rc=1
fi
exit $rc
