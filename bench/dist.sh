#!/usr/bin/env bash
# Data-parallel training on one machine (issue 13, docs/DISTRIBUTED.md): the same global batch trained by
# 1 rank x 2 threads and by 2 ranks x 1 thread (mpirun), for the GPT "baby" config on tinyshakespeare and
# the Multi30k Transformer. Prints per run: iterations/s, ms per step, and where a step's time goes
# (from --profile): compute (ops, clip, optimizer), allreduce (the loss/stop sum and the gradient
# all-reduce, transfers included), wait (a barrier before them: the time rank 0 waits for the slowest rank).
#
#   bench/dist.sh [--smoke] [--steps N] [--rounds R] [--build DIR] [gpt] [mt]
#
# Each workload runs R rounds (default 3), the two configurations alternating, and the median of each is
# printed last.
# --smoke: 2 steps of tiny models on small data, to check that the script runs (tests/cli/mpi.sh); its
# numbers mean nothing. Builds DIR/tfm with MPI=1 (default DIR build-mpi). Run it on an idle machine: with
# other jobs on the cores the ranks wait for CPU time, not for each other.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=build-mpi
STEPS=50
ROUNDS=3
SMOKE=0
WHAT=""
while [ $# -gt 0 ]; do
    case $1 in
        --smoke) SMOKE=1; STEPS=2; ROUNDS=1;;
        --rounds) ROUNDS=$2; shift;;
        --steps) STEPS=$2; shift;;
        --build) BUILD=$2; shift;;
        gpt|mt) WHAT="$WHAT $1";;
        *) echo "bench/dist.sh: unknown argument '$1' (see the header)" >&2; exit 2;;
    esac
    shift
done
WHAT=${WHAT:-gpt mt}
command -v mpirun >/dev/null || { echo "bench/dist.sh: mpirun not found (apt-get install openmpi-bin libopenmpi-dev)" >&2; exit 2; }
make --no-print-directory -j2 MPI=1 BUILD="$BUILD" "$BUILD/tfm" >/dev/null
TFM=$PWD/$BUILD/tfm
DATA=$PWD/../shared/data
TMP=$(mktemp -d /tmp/tfm_dist.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# run NAME RANKS THREADS ARGS...: one training run with --profile; prints the summary line
run() {
    local name=$1 np=$2 threads=$3 log="$TMP/$1.$2x$3.log"; shift 3
    if [ "$np" = 1 ]; then
        "$TFM" "$@" --threads "$threads" --profile --out "$TMP/$name.tfm" --overwrite 2>"$log"
    else
        mpirun -np "$np" --bind-to none -x OMP_NUM_THREADS="$threads" "$TFM" "$@" --threads "$threads" --profile \
            --out "$TMP/$name.tfm" --overwrite 2>"$log"
    fi || { echo "bench/dist.sh: $name with $np rank(s) failed:" >&2; tail -n 3 "$log" >&2; exit 1; }
    awk -v name="$name" -v np="$np" -v th="$threads" '
        /^profile/ { on = 1; next }
        on && $1 == "total" { total = $2; on = 0 }
        on && $1 == "allreduce" { ar = $2 }
        on && $1 == "dist_wait" { wait = $2 }
        END {
            if (!total) { print name ": no profile in the log"; exit 1 }
            printf "%-4s %d rank(s) x %d thread(s): %7.2f it/s  %8.2f ms/step  compute %8.2f ms  allreduce %7.2f ms  wait %7.2f ms\n",
                   name, np, th, 1000 / total, total, total - ar - wait, ar + 0, wait + 0 }' "$log"
}

echo "# bench/dist.sh $(date -u +%Y-%m-%dT%H:%MZ) $(git log -1 --format=%h 2>/dev/null); $STEPS steps, $ROUNDS round(s);" \
     "load: $(cut -d' ' -f1-3 /proc/loadavg); $(mpirun --version 2>/dev/null | head -1)"
bash bench/sysinfo.sh
for w in $WHAT; do
    if [ "$w" = gpt ]; then
        if [ $SMOKE = 1 ]; then
            head -c 20000 data/demo.txt >"$TMP/lm.txt"
            A="--data $TMP/lm.txt --n-layer 1 --n-head 2 --n-embd 16 --block-size 8 --batch-size 4"
        else
            A="--data $DATA/tinyshakespeare/input.txt --n-layer 4 --n-head 4 --n-embd 128 --block-size 64 --batch-size 12"
        fi
        A="$A --iters $STEPS --eval-every 1000000 --eval-iters 1 --log-every 1000000"
    else
        if [ $SMOKE = 1 ]; then
            A="--tsv $DATA/fra-eng/fra.txt --num-examples 64 --batch-size 32 --d-model 16 --ffn 32 --n-layer 1"
        else
            A="--src $DATA/multi30k/train.de --tgt $DATA/multi30k/train.en --preprocess moses --min-freq 2 --max-len 40
               --d-model 256 --n-head 8 --n-layer 3 --ffn 512 --dropout 0.1 --label-smoothing 0.1 --schedule noam
               --lr 0.3 --warmup 100 --batch-size 64 --bucket 8 --num-examples 0 --seed 1"
        fi
        A="$A --epochs 1 --max-steps $STEPS --log-every 0"
    fi
    cmd=$([ "$w" = gpt ] && echo train-lm || echo train-mt)
    for _ in $(seq "$ROUNDS"); do
        # shellcheck disable=SC2086
        run "$w" 1 2 $cmd $A | tee -a "$TMP/rounds"
        # shellcheck disable=SC2086
        run "$w" 2 1 $cmd $A | tee -a "$TMP/rounds"
    done
done
# the median round of each configuration (by ms/step)
if [ "$ROUNDS" -gt 1 ]; then
    echo "# medians of $ROUNDS rounds (by ms/step)"
    cut -d: -f1 "$TMP/rounds" | awk '!seen[$0]++' | while IFS= read -r key; do
        grep -F "$key:" "$TMP/rounds" | sort -k9,9g | sed -n "$(( (ROUNDS + 1) / 2 ))p"
    done
fi
