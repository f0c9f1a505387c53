#!/usr/bin/env bash
# The producing tools' own full checkpoints on the GPU machine, in one call: each maker in
# tests/fixture_makers/ writes its Llama variants whole (the repository keeps layer 0 of
# each; the bitsandbytes maker also its MoE); every one is converted as stored and put through
# `iris verify --device cuda`; python/tests/test_tool_twins_gpu.py serves every Llama through
# iris against its dequantized twin (LLM.int8 also against bitsandbytes' own int8 matmul); and
# the schemes' CPU tests and the int_group GPU ones run beside them.
#
# The tools' public source travels as one ignored tarball, .peer/pack/tools.tar.xz (never
# committed): bitsandbytes (built here with CMake + nvcc for this card), compressed-tensors +
# llm-compressor and ModelOpt (.peer/toolsrc), GPTQModel's gptqmodel/ and AutoAWQ's awq/ at the
# commits README-gptq-awq.md names. Made with:
#   tar -cJf .peer/pack/tools.tar.xz --exclude=bnb-src/{tests,docs,agents,build} -C .peer bnb-src toolsrc \
#       -C <extracted sources> gptqmodel autoawq
#
#   device run (carry .device-bin .peer/pack):  bash bench/tool_twins_gpu_session.sh
set -uo pipefail
cd "$(dirname "$0")/.."
. bench/device_env.sh
OUT=${OUT:-/tmp/iris-twins}
F="$OUT/fixtures"
mkdir -p "$F" "$OUT/refs"
T=$(mktemp -d)
tar -xJf .peer/pack/tools.tar.xz -C "$T"
rc=0
(cd "$T/bnb-src" && cmake -S . -B build -G Ninja -DCOMPUTE_BACKEND=cuda -DCOMPUTE_CAPABILITY="$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d .)" \
   && ninja -C build) > "$OUT/bnb-build.log" 2>&1 || { rc=1; echo "FAIL bitsandbytes build: $(tail -c 800 "$OUT/bnb-build.log")"; }
maker() {  # maker NAME COMMAND...
  local name=$1; shift
  local start=$(date +%s)
  "$@" > "$OUT/maker-$name.log" 2>&1 || { rc=1; echo "FAIL maker $name: $(tail -c 800 "$OUT/maker-$name.log")"; }
  echo "maker $name: $(( $(date +%s) - start )) s"
}
maker bnb env PYTHONPATH="$T/bnb-src" python3 tests/fixture_makers/bnb_llm_int8.py --out-fixtures "$F" --out-refs "$OUT/refs"
maker ct python3 tests/fixture_makers/compressed_tensors_pack_quantized.py --tool-src "$T/toolsrc/ct" --llmc-src "$T/toolsrc/llmc" \
  --tool-version 0.18.0 --fixtures-out "$F" --refs-out "$OUT/refs" \
  --variants llama-ct-w4a16-g128,llama-ct-w4-asym-g64,llama-ct-w8a16-channel,llama-ct-w8-asym-g128,llama-ct-w4-g128-actorder,llama-ct-nvfp4a16,llama-ct-mxfp4a16,llama-ct-fp8-tensor,llama-ct-fp8-channel,llama-ct-fp8-block
maker modelopt python3 tests/fixture_makers/modelopt_nvfp4.py --tool-src "$T/toolsrc/modelopt" --out-fixtures "$F" --out-refs "$OUT/refs"
maker gptq python3 tests/fixture_makers/gptq.py --tool-src "$T/gptqmodel" --out "$F" --refs "$OUT/refs" \
  --only llama-gptq-4bit-g128-sym-v1,llama-gptq-4bit-g64-asym-descact-v1,llama-gptq-8bit-channel-sym-v2,llama-gptq-3bit-g128-asym-v1,llama-gptq-2bit-g64-asym-v2
maker awq python3 tests/fixture_makers/awq.py --tool-src "$T/autoawq" --out "$F" --refs "$OUT/refs"
I="$PWD/$B/iris"
. bench/gpu_verify.sh
for f in "$F"/*; do
  [ -d "$f" ] && convert_and_verify "$f"
done
IRIS_TOOL_SNAPSHOTS="$F" IRIS_LIBRARY="$PWD/$B/libiris.so.1" PYTHONPATH="$PWD/python:$T/bnb-src" python3 -m pytest -q -s -p no:cacheprovider \
  python/tests/test_tool_twins_gpu.py python/tests/test_int_group_gpu.py python/tests/test_bnb_int8.py python/tests/test_ct_mxfp4.py \
  python/tests/test_ct_fp8.py > "$OUT/twins.log" 2>&1 || rc=1
grep -E "IrisLinear|int8 matmul|passed|failed|SKIP|Error" "$OUT/twins.log" | head -40
exit $rc
