#!/usr/bin/env bash
# The all-reduce alone (issue 13, docs/DISTRIBUTED.md "Measured on one machine"): tfm's deterministic
# tfm_dist_allreduce_sum and Open MPI's MPI_Allreduce (--native) on the GPT's (3.24 MB) and the Multi30k
# Transformer's (36.87 MB) gradient blocks, 2-4 ranks, shared memory and TCP over loopback; 5 timed
# repetitions after a warm-up, best / mean ms and bus bandwidth. Builds build-mpi/mpi/dist_check (MPI=1).
#   bench/allreduce.sh [--reps N]      Run it on an idle machine.
set -euo pipefail
cd "$(dirname "$0")/.."
REPS=5
[ "${1:-}" = --reps ] && REPS=$2
command -v mpirun >/dev/null || { echo "bench/allreduce.sh: mpirun not found (apt-get install openmpi-bin libopenmpi-dev)" >&2; exit 2; }
make --no-print-directory -j2 MPI=1 BUILD=build-mpi build-mpi/mpi/dist_check >/dev/null
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
echo "# bench/allreduce.sh $(date -u +%Y-%m-%dT%H:%M:%SZ) $(git log -1 --format=%h 2>/dev/null); load: $(cut -d' ' -f1-3 /proc/loadavg);" \
     "$(mpirun --version 2>/dev/null | head -1)"
bash bench/sysinfo.sh
for btl in vader tcp; do
    mca=""; [ $btl = tcp ] && mca="--mca btl tcp,self"
    for n in 2 3 4; do
        for f in 809856 9217157; do
            for native in "" --native; do
                printf '%-6s ' "$btl"
                # shellcheck disable=SC2086
                timeout 120 mpirun --oversubscribe --bind-to none $mca -np "$n" build-mpi/mpi/dist_check bench \
                    --floats "$f" --reps "$REPS" $native 2>&1 | tail -n 1
            done
        done
    done
done
