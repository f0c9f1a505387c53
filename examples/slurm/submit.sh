#!/usr/bin/env bash
# Converts a checkpoint as N parts on a Slurm cluster: a job array of N tasks, then a merge job
# that runs when all of them succeeded. Every task reads the source and writes its part on a
# filesystem all nodes share.
#
#   SRC=/shared/models/llama OUT=/shared/llama-nf4.iris PARTS=8 OPTIONS="--quant nf4" \
#     bash examples/slurm/submit.sh [extra sbatch options, e.g. --partition=cpu]
#
# IRIS: the iris binary (default: iris on PATH). Prints the two job ids.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
: "${SRC:?the snapshot to convert}" "${OUT:?the archive to write}" "${PARTS:=4}"
export SRC OUT PARTS OPTIONS="${OPTIONS:-}" IRIS="${IRIS:-iris}"
array=$(sbatch --parsable --export=ALL --array="1-$PARTS" "$@" "$here/convert_part.sbatch")
merge=$(sbatch --parsable --export=ALL --dependency="afterok:$array" "$@" "$here/merge.sbatch")
echo "array $array, merge $merge"
