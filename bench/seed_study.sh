#!/usr/bin/env bash
# Seed study (issue 14): does a full training run learn as well in tfm as in PyTorch? Trains each model
# with N seeds in tfm and in its PyTorch twin, then prints per model mean ± standard error over seeds of
# both sides and their difference (scripts/seed_summary.py), and writes per-seed results.
#
#   bench/seed_study.sh [transformer|rnn|bahdanau|all|multi30k] [--seeds N] [--epochs E] [--threads T]
#                       [--out DIR] [--max-steps S] [--build DIR]
#
#   transformer|rnn|bahdanau|all  the d2l fra-eng recipes of docs/RECIPES.md (600 pairs, num_steps 10,
#       --loss-norm d2l, the book's 4 sentences with d2l sentence BLEU); the twin is scripts/d2l_twin.py,
#       built to the book's code. Default: all, 5 seeds, the recipe's epochs (200 / 300 / 300).
#   multi30k  the benchmark Transformer of docs/BENCHMARKS.md (d_model 256, 3+3 layers, 8 heads, FFN 512,
#       dropout 0.1, label smoothing 0.1, Noam 0.3 / warmup 100, batch 64, bucket 8, Moses tokens keeping
#       case, min-freq 2, max-len 40) for --epochs (default 2) on all 29,000 pairs; validation loss and
#       greedy BLEU on val (tfm bleu for both sides); the twin is scripts/mt_twin_train.py (tfm's structure
#       and init, Python port of tfm's preprocessing, checked against --dump-data first).
#       Default 3 seeds. --max-steps S stops both sides after S optimizer steps (for a smoke test). The twin's
#       weights are kept (twin_seedS.pt) for scripts/mt_eos_probe.py. Use --threads 1: the twin's outcome
#       depends on torch's thread count (docs/RECIPES.md), tfm's does not.
#
# Runs are sequential, each side on --threads T (default 1; PyTorch with torch.set_num_threads(T) and
# OPENBLAS_NUM_THREADS=1). A run whose results exist in --out (default /tmp/seed_study) is not redone, so
# an interrupted study continues where it stopped. --out and --build (default: the repository's build/)
# are relative to the current directory; the data is ../shared/data seen from the repository root. Needs `make` first.
set -eu

ROOT=$(cd "$(dirname "$0")/.." && pwd)   # data and scripts are found from the repository root
FRA=../shared/data/fra-eng/fra.txt
M30K=../shared/data/multi30k
PY=/usr/bin/python3   # Debian's torch 1.13

usage() { sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-0}"; }
die() { echo "seed_study.sh: $*" >&2; exit 2; }

# ---------------------------------------------------------------- arguments
which=all seeds= epochs=0 threads=1 out=/tmp/seed_study max_steps=0 build=
while [ $# -gt 0 ]; do
    case $1 in
        transformer|rnn|bahdanau|all|multi30k) which=$1 ;;
        --seeds) seeds=${2:?--seeds needs a value}; shift ;;
        --epochs) epochs=${2:?--epochs needs a value}; shift ;;
        --threads) threads=${2:?--threads needs a value}; shift ;;
        --out) out=${2:?--out needs a value}; shift ;;
        --max-steps) max_steps=${2:?--max-steps needs a value}; shift ;;
        --build) build=${2:?--build needs a value}; shift ;;
        -h|--help) usage 0 ;;
        *) die "unknown argument '$1' (see --help)" ;;
    esac
    shift
done
for v in "${seeds:-1}" "$epochs" "$threads" "$max_steps"; do
    case $v in ''|*[!0-9]*) die "--seeds, --epochs, --threads and --max-steps take non-negative integers, got '$v'" ;; esac
done
[ "$which" = multi30k ] && : "${seeds:=3}" || : "${seeds:=5}"
[ "$seeds" -ge 1 ] && [ "$threads" -ge 1 ] || die "--seeds and --threads must be >= 1"
case $out in /*) ;; *) out=$PWD/$out ;; esac
case $build in '') build=$ROOT/build ;; /*) ;; *) build=$PWD/$build ;; esac
cd "$ROOT"
TFM=$build/tfm
[ -x "$TFM" ] || die "$TFM not found (run make, or give --build DIR)"
[ -f "$FRA" ] && [ -d "$M30K" ] || die "../shared/data not found (run from the repository root)"
$PY -c 'import torch' 2>/dev/null || die "$PY has no torch"
export OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=1

# ---------------------------------------------------------------- d2l fra-eng recipes
recipe_flags() { # model -> the tfm train-mt flags of docs/RECIPES.md (without seed, threads, epochs)
    local common="--tsv $FRA --num-examples 600 --max-len 10 --pad-to-max-len --preprocess d2l --lr 0.005 --batch-size 64 --loss-norm d2l"
    case $1 in
        transformer) echo "$common --arch transformer --d-model 32 --n-layer 2 --n-head 4 --ffn 64 --dropout 0.2" ;;
        rnn|bahdanau) echo "$common --arch $1 --embed-size 32 --hidden-size 32 --n-layer 2 --dropout 0.1" ;;
    esac
}
recipe_epochs() { case $1 in transformer) echo 200 ;; *) echo 300 ;; esac; }

check_d2l_data() { # dir: the twin's data pipeline equals tfm's on the 600 pairs (sentences and vocabularies)
    $TFM train-mt $(recipe_flags transformer) --out "$1/unused.tfm" --dump-data "$1/fra" --dump-only 2>/dev/null
    $PY scripts/d2l_twin.py --arch rnn --check-dump "$1/fra" --check-only
}

timed() { # file command...: run it, writing "wall user sys" seconds to file
    /usr/bin/time -f '%e %U %S' -o "$1" "${@:2}"
}
times_of() { # time file -> "W s wall (C s CPU)"
    awk '/^[0-9.]+ [0-9.]+ [0-9.]+$/ { printf "%.0f s wall (%.0f s CPU)", $1, $2 + $3 }' "$1" 2>/dev/null
}

d2l_seed() { # model seed epochs dir: one tfm run and one twin run; prints their times
    local m=$1 s=$2 e=$3 d=$4
    if [ ! -s "$d/tfm_seed$s.out" ]; then
        timed "$d/tfm_seed$s.time" $TFM train-mt $(recipe_flags "$m") --epochs "$e" --seed "$s" --threads "$threads" --log-every 0 \
            --out "$d/tfm_seed$s.tfm" --overwrite --d2l-examples >"$d/tfm_seed$s.part" 2>"$d/tfm_seed$s.err" \
            || die "tfm $m seed $s failed: $(tail -n 2 "$d/tfm_seed$s.err")"
        mv "$d/tfm_seed$s.part" "$d/tfm_seed$s.out"
        rm -f "$d/tfm_seed$s.tfm"
    fi
    if [ ! -s "$d/twin_seed$s.out" ]; then
        timed "$d/twin_seed$s.time" $PY scripts/d2l_twin.py --arch "$m" --epochs "$e" --seed "$s" --threads "$threads" \
            >"$d/twin_seed$s.part" 2>"$d/twin_seed$s.err" || die "twin $m seed $s failed: $(tail -n 2 "$d/twin_seed$s.err")"
        mv "$d/twin_seed$s.part" "$d/twin_seed$s.out"
    fi
    echo "$m seed $s/$seeds ($e epochs): tfm $(times_of "$d/tfm_seed$s.time"), twin $(times_of "$d/twin_seed$s.time")" >&2
}

d2l_study() { # model
    local m=$1 e=$epochs d=$out/d2l/$1
    [ "$e" -gt 0 ] || e=$(recipe_epochs "$m")
    mkdir -p "$d"
    for s in $(seq 1 "$seeds"); do d2l_seed "$m" "$s" "$e" "$d"; done
}

# ---------------------------------------------------------------- Multi30k, short run
M30K_FLAGS="--preprocess moses --min-freq 2 --max-len 40 --d-model 256 --n-head 8 --n-layer 3 --ffn 512 --dropout 0.1
  --label-smoothing 0.1 --schedule noam --lr 0.3 --warmup 100 --batch-size 64 --bucket 8 --num-examples 0"
M30K_TWIN="--preprocess moses --min-freq 2 --max-len 40 --d-model 256 --n-head 8 --n-layer 3 --ffn 512 --dropout 0.1
  --label-smoothing 0.1 --lr 0.3 --warmup 100 --batch-size 64 --bucket 8 --num-examples 0"

check_m30k_data() { # dir: the twin's Python preprocessing equals tfm's on all training pairs
    $TFM train-mt --src $M30K/train.de --tgt $M30K/train.en $M30K_FLAGS --out "$1/unused.tfm" \
        --dump-data "$1/m30k" --dump-only 2>/dev/null
    $PY scripts/mt_twin_train.py $M30K_TWIN --out "$1" --check-dump "$1/m30k" --check-only >&2
}

m30k_tfm() { # seed epochs dir
    local s=$1 e=$2 d=$3
    [ -s "$d/tfm_seed$s.bleu" ] && return
    timed "$d/tfm_seed$s.time" $TFM train-mt --src $M30K/train.de --tgt $M30K/train.en --valid-src $M30K/val.de --valid-tgt $M30K/val.en \
        $M30K_FLAGS --epochs "$e" --max-steps "$max_steps" --seed "$s" --threads "$threads" --log-every 0 \
        --out "$d/tfm_seed$s.tfm" --overwrite 2>"$d/tfm_seed$s.err" || die "tfm multi30k seed $s failed: $(tail -n 2 "$d/tfm_seed$s.err")"
    if ! grep -q 'valid loss' "$d/tfm_seed$s.err"; then   # stopped mid-epoch: no validation loss printed
        $PY scripts/mt_twin_train.py $M30K_TWIN --out "$d" --eval-tfm "$d/tfm_seed$s.tfm" >"$d/tfm_seed$s.valid"
    fi
    $TFM translate "$d/tfm_seed$s.tfm" --beam 1 --max-output 60 --threads "$threads" <$M30K/val.de >"$d/tfm_seed$s.hyp"
    $TFM bleu "$d/tfm_seed$s.hyp" $M30K/val.en >"$d/tfm_seed$s.bleu"
}

m30k_twin() { # seed epochs dir
    local s=$1 e=$2 d=$3
    [ -s "$d/twin_seed$s.bleu" ] && return
    timed "$d/twin_seed$s.time" $PY scripts/mt_twin_train.py $M30K_TWIN --epochs "$e" --max-steps "$max_steps" --seed "$s" --threads "$threads" \
        --out "$d" --save-weights >"$d/twin_seed$s.log" 2>&1 || die "twin multi30k seed $s failed: $(tail -n 2 "$d/twin_seed$s.log")"
    $TFM bleu "$d/twin_seed$s.hyp" $M30K/val.en >"$d/twin_seed$s.bleu"
}

m30k_study() {
    local e=$epochs d=$out/multi30k
    [ "$e" -gt 0 ] || e=2
    mkdir -p "$d"
    check_m30k_data "$d"
    for s in $(seq 1 "$seeds"); do
        m30k_tfm "$s" "$e" "$d"
        m30k_twin "$s" "$e" "$d"
        echo "multi30k seed $s/$seeds ($e epochs, --max-steps $max_steps): training tfm $(times_of "$d/tfm_seed$s.time"), twin" \
            "$(times_of "$d/twin_seed$s.time") (the twin's includes translating val)" >&2
    done
}

# ---------------------------------------------------------------- main
mkdir -p "$out"
echo "seed study: $which, $seeds seeds, $threads thread(s), results in $out; $(uptime)" >&2
case $which in
    multi30k) m30k_study ;;
    all) mkdir -p "$out/data"; check_d2l_data "$out/data"; for m in transformer rnn bahdanau; do d2l_study $m; done ;;
    *) mkdir -p "$out/data"; check_d2l_data "$out/data"; d2l_study "$which" ;;
esac
$PY scripts/seed_summary.py "$out"
