#!/usr/bin/env bash
# The int_group kernels (kernels/int_group.cu) on a GPU: every GPTQ / AWQ / compressed-tensors /
# LLM.int8 fixture (and the compressed-tensors NVFP4, MXFP4 and FP8 ones) and every synthetic case of python/tests/test_packed_integers.py (2/3/4/8 bits,
# symmetric or not, act-order, odd N and K, negative and subnormal scales) converted as stored
# and put through `iris verify --device cuda`: the GPU's dequantization against the CPU
# reference bit for bit (F32 and BF16 outputs) and its GEMV within the FP32 bound, on fresh
# random activations. From the repository root on the GPU machine, with the static build in
# .device-bin (bench/pack_device_bin.sh):
#
#   device run (carry .device-bin):  bash bench/int_group_gpu_check.sh
#
# Writes its logs under $OUT (default /tmp/iris-int-group); exit 1 when any archive fails.
set -uo pipefail
cd "$(dirname "$0")/.."
. bench/device_env.sh
OUT=${OUT:-/tmp/iris-int-group}
mkdir -p "$OUT/archives"
I="$PWD/$B/iris"
export PYTHONPATH="$PWD/python"
rc=0
. bench/gpu_verify.sh
for f in tests/data/fixtures/llama-gptq-* tests/data/fixtures/llama-awq-* tests/data/fixtures/llama-ct-* tests/data/fixtures/*-bnb-int8; do
  convert_and_verify "$f"
done
# The synthetic cases, written by the test's own numpy packers.
python3 - "$OUT/archives" <<'PY'
import sys
from pathlib import Path
sys.path.insert(0, "python/tests")
import test_packed_integers as t
out = Path(sys.argv[1])
for name, make in sorted(t.CASES.items()):
    tensors, qc, _ = make()
    t.write_snapshot(out / ("snap-" + name), tensors, qc)
PY
for s in "$OUT"/archives/snap-*; do
  [ -d "$s" ] && convert_and_verify "$s"
done
exit $rc
