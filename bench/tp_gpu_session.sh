#!/usr/bin/env bash
# The multi-GPU session of issue 27 as one device command, in the order that spends a short
# lease best: each stage under its own time limit (a hang costs that stage, not the call), its
# log under $OUT, and a one-line verdict per stage on stdout. From the repository root on a
# machine of N GPUs, with the static build carried in .device-bin (bench/pack_device_bin.sh):
#
#   device run (kind nvidia-h200-x2 or -x4, carry .device-bin):  bash bench/tp_gpu_session.sh [STAGES...]
#
# Stages (default: all of them, in this order: more than one device command's 10 minutes):
#   probe      bench/nccl_graph_probe.py: NCCL in graphs and compiled, its exchange latency, and
#              symmetric memory's (a minute)
#   tests      python/tests/test_models_tp_gpu.py's decodes (the fixtures' TP and EP decodes, both
#              exchanges; on two H200s its 16 cases took most of 520 s, 2026-11-29)
#   tests-exact  the rest: its exact-sums cases and refusals, and test_exact_layers_tp.py
#   symmetric  Llama-3-8B MXFP4 and gpt-oss-20b at full size, TP=N, exchange="symmetric"
#              (ms/token, tokens and teacher-forced picks against one GPU, the noise floor)
#   process-group  the same over NCCL's all_reduce, without the noise floor
#   knock-out  Llama-3-8B MXFP4 and gpt-oss-20b, TP=N, symmetric exchange, 16 steps, each rank
#              timed again with its all_reduce of partial sums knocked out (timing only): what
#              the exchanges cost inside the step (two H200s: TP=2 saved 0.02 ms of 2.35)
#   exact      Llama-3-8B MXFP4 and gpt-oss-20b at TP=N with exact sums on both sides: the
#              tokens must equal one GPU's (FP32 weights but for MXFP4 expert stacks, which stay
#              quantized while each call dequantizes the picked experts)
#   ep         gpt-oss-20b at TP=N with --ep N, both exchanges
#   large      gpt-oss-120b at TP=N, symmetric exchange, without the noise floor (about 5.5
#              minutes on two H200s); its whole archive and ranks take 124 GiB of disk (two GPUs'
#              128 GiB barely holds them: LAYERS=18 halves it)
#   large-ep   the same with --ep N
#   large-exact  gpt-oss-120b at TP=N with exact sums, 16 steps: its tokens must equal one GPU's
#              (whole stacks in FP32 would be 468 GB; kept in MXFP4, rank 0 holds its rank and
#              the whole model in about 113 GB by their sizes; ran on two H200s in 316 s,
#              2026-11-29: tokens equal, 16 of 16)
# N is the machine's GPU count. LIMIT_<STAGE> overrides a stage's seconds (defaults below;
# LIMIT_EP_SYMMETRIC for ep-symmetric). A device command has 10 minutes: give each call the
# stages whose limits fit it: `tests` (540 s), `probe tests-exact` (540), `symmetric process-group` (540), `knock-out` (300), `exact`
# (540), `ep` (400), `large` (540), `large-ep` (540), `large-exact` (540). Exit status: 1 when any stage failed or timed out.
set -uo pipefail
cd "$(dirname "$0")/.."
. bench/device_env.sh
export IRIS_LIBRARY="$PWD/$B/libiris.so.1" PYTHONPATH="$PWD/python" IRIS_MAKE_SNAPSHOT="$PWD/$B/iris_make_snapshot"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/iris-tp-session}
mkdir -p "$OUT"
N=$(python3 -c 'import torch; print(torch.cuda.device_count())')
stages=("$@")
[ ${#stages[@]} -gt 0 ] || stages=(probe tests tests-exact symmetric process-group exact ep large large-ep)
echo "$N GPUs: $(nvidia-smi --query-gpu=name --format=csv,noheader | sort | uniq -c | xargs)"

rc=0
stage() {  # NAME DEFAULT_SECONDS COMMAND...: run under its limit, log to $OUT/NAME.log, say how it ended
  # At the limit: SIGUSR1 first (tp_decode.py's ranks print their stacks to the log), SIGKILL 20 s later.
  local name=$1 limit_var="LIMIT_$(echo "$1" | tr 'a-z-' 'A-Z_')" seconds=$2
  shift 2
  local t0=$SECONDS
  timeout -s USR1 -k 20 "${!limit_var:-$seconds}" "$@" > "$OUT/$name.log" 2>&1
  local status=$?
  local how="exit $status"
  { [ $status -eq 124 ] || [ $status -eq 137 ]; } && how="TIMED OUT after ${!limit_var:-$seconds} s"
  [ $status -eq 0 ] || rc=1
  echo "== $name: $how, $((SECONDS - t0)) s =="
  grep -E "us each|passed|failed|tokens_equal|_ms_per_token|knocked out|teacher_forced_picks|Error" "$OUT/$name.log" | tail -n 14
}

# Each stage states what it runs: the caller's EXCHANGE / EP / NOISE_FLOOR / EXACT do not leak in.
run=(env -u EXCHANGE -u EP -u NOISE_FLOOR -u EXACT -u KNOCK_OUT VERIFY=0 STEPS=64 OUT="$OUT")
for s in "${stages[@]}"; do
  case "$s" in
    probe) stage probe 60 python3 bench/nccl_graph_probe.py "$N" ;;
    tests) stage tests 540 bash -c 'cd python/tests && python3 -m pytest -q -s -k "not exact_sums and not refused" test_models_tp_gpu.py' ;;
    tests-exact) stage tests-exact 480 bash -c 'cd python/tests && python3 -m pytest -q -s -k "exact_sums or refused or exact_layers" test_models_tp_gpu.py test_exact_layers_tp.py' ;;
    symmetric) stage symmetric 300 "${run[@]}" EXCHANGE=symmetric bash bench/tp_decode_run.sh "$N" llama-3-8b:mxfp4 gpt-oss-20b:as-shipped ;;
    knock-out) stage knock-out 300 "${run[@]}" EXCHANGE=symmetric NOISE_FLOOR=0 KNOCK_OUT=1 STEPS=16 bash bench/tp_decode_run.sh "$N" llama-3-8b:mxfp4 gpt-oss-20b:as-shipped ;;
    process-group) stage process-group 240 "${run[@]}" NOISE_FLOOR=0 bash bench/tp_decode_run.sh "$N" llama-3-8b:mxfp4 gpt-oss-20b:as-shipped ;;
    exact) stage exact 540 "${run[@]}" EXACT=1 NOISE_FLOOR=0 bash bench/tp_decode_run.sh "$N" llama-3-8b:mxfp4 gpt-oss-20b:as-shipped ;;
    ep)
      stage ep-symmetric 200 "${run[@]}" EP="$N" EXCHANGE=symmetric NOISE_FLOOR=0 bash bench/tp_decode_run.sh "$N" gpt-oss-20b:as-shipped
      stage ep-process-group 200 "${run[@]}" EP="$N" NOISE_FLOOR=0 bash bench/tp_decode_run.sh "$N" gpt-oss-20b:as-shipped ;;
    large) stage large 540 "${run[@]}" EXCHANGE=symmetric NOISE_FLOOR=0 bash bench/tp_decode_run.sh "$N" gpt-oss-120b:as-shipped ;;
    large-ep) stage large-ep 540 "${run[@]}" EP="$N" EXCHANGE=symmetric NOISE_FLOOR=0 bash bench/tp_decode_run.sh "$N" gpt-oss-120b:as-shipped ;;
    large-exact) stage large-exact 540 "${run[@]}" EXACT=1 NOISE_FLOOR=0 STEPS=16 bash bench/tp_decode_run.sh "$N" gpt-oss-120b:as-shipped ;;
    *) echo "unknown stage '$s' (probe tests tests-exact symmetric knock-out process-group exact ep large large-ep large-exact)" >&2; exit 2 ;;
  esac
done
exit $rc
