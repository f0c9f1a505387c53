#!/usr/bin/env bash
# Runs examples/slurm/submit.sh for real on a one-node Slurm cluster started here from Debian's
# packages (slurmctld, slurmd, slurm-client, munge; localhost only, nothing of the system's
# configuration touched: every file in a temporary folder), and checks that the merged archive
# is byte for byte the single-process conversion's.
#
#   bash examples/slurm/local_slurm_test.sh [IRIS binary (default build/converter/iris)] [SRC snapshot]
#
# Exit 0: passed; 1: failed; 77: skipped (no Slurm or munge installed, or the daemons would not
# start here), with the reason on stderr. Needs root (munged and slurmd run as root here).
set -uo pipefail
IRIS=$(realpath "${1:-build/converter/iris}")
SRC=$(realpath "${2:-tests/data/fixtures/llama-bf16}")
here=$(cd "$(dirname "$0")" && pwd)
skip() { echo "local_slurm_test: skipped: $*" >&2; exit 77; }
for b in munged slurmctld slurmd sbatch squeue sinfo; do command -v "$b" > /dev/null || skip "$b not installed (apt-get install slurmctld slurmd slurm-client munge)"; done
[ "$(id -u)" = 0 ] || skip "needs root to start munged and slurmd"
T=$(mktemp -d /tmp/iris-slurm-XXXXXX)
chmod 755 "$T"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2> /dev/null; done; wait 2> /dev/null; rm -rf "$T"; }
trap cleanup EXIT
node=$(hostname -s)
port=$((20000 + RANDOM % 20000))
mkdir -p "$T/state" "$T/spool" "$T/munge" "$T/out"
dd if=/dev/urandom of="$T/munge/munge.key" bs=1024 count=1 status=none
chmod 400 "$T/munge/munge.key"
chmod 700 "$T/munge"
munged --force --key-file="$T/munge/munge.key" --socket="$T/munge/munge.socket" --pid-file="$T/munge/munged.pid" \
  --log-file="$T/munge/munged.log" --seed-file="$T/munge/munged.seed" || skip "munged would not start: $(tail -n 2 "$T/munge/munged.log" 2>/dev/null)"
pids+=("$(cat "$T/munge/munged.pid")")
cat > "$T/slurm.conf" <<CONF
ClusterName=iris-test
SlurmctldHost=$node
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$port
SlurmdPort=$((port + 1))
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$T/munge/munge.socket
StateSaveLocation=$T/state
SlurmdSpoolDir=$T/spool
SlurmctldPidFile=$T/slurmctld.pid
SlurmdPidFile=$T/slurmd.pid
SlurmctldLogFile=$T/slurmctld.log
SlurmdLogFile=$T/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
ReturnToService=2
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
NodeName=$node CPUs=$(nproc) State=UNKNOWN
PartitionName=local Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
CONF
export SLURM_CONF="$T/slurm.conf"
slurmctld -D -i > "$T/slurmctld.out" 2>&1 &
pids+=($!)
slurmd -D > "$T/slurmd.out" 2>&1 &
pids+=($!)
up=0
for _ in $(seq 1 60); do
  if sinfo -h -o %t 2> /dev/null | grep -qE "idle|mix"; then up=1; break; fi
  sleep 0.5
done
[ $up = 1 ] || skip "the one-node cluster did not come up: $(tail -n 3 "$T/slurmctld.log" "$T/slurmd.log" 2>/dev/null | tr '\n' ' ')"

parts=3
out="$T/out/model.iris"
ids=$(cd "$T/out" && SRC="$SRC" OUT="$out" PARTS=$parts OPTIONS="--quant nf4" IRIS="$IRIS" bash "$here/submit.sh" --cpus-per-task=1)
echo "submitted: $ids"
merge=${ids##* }
for _ in $(seq 1 240); do
  state=$(scontrol show job "$merge" 2> /dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p')
  case "$state" in COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL | OUT_OF_MEMORY) break ;; esac
  sleep 0.5
done
echo "merge job $merge: ${state:-unknown}"
"$IRIS" convert "$SRC" -o "$T/single.iris" -q --quant nf4
if [ "$state" = COMPLETED ] && cmp -s "$out" "$T/single.iris" && ! ls "$out".part-* > /dev/null 2>&1; then
  echo "local_slurm_test: passed: $parts array tasks and a dependent merge gave the single-process archive byte for byte"
  exit 0
fi
echo "local_slurm_test: FAILED (merge job ${state:-unknown}); logs:" >&2
tail -n 5 "$T"/out/*.log "$T/slurmctld.log" "$T/slurmd.log" >&2 2> /dev/null
exit 1
