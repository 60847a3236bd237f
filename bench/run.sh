#!/usr/bin/env bash
# tfm vs PyTorch, side by side, in one run (issue 5). Each workload runs tfm and its PyTorch twin
# alternately (the order flips every round), ROUNDS times, 2 threads each side, and prints the median
# of each side and the tfm/PyTorch ratio (> 1 means tfm is faster; for RSS, < 1 means tfm uses less).
#
#   bench/run.sh [--quick] [--rounds R] [--threads N] [--build DIR] [all|gemm|gpt|mt|gen|translate ...]
#
#   gemm       (a) GEMM GFLOP/s, tfm vs OpenBLAS, 1 and 2 threads (bench/gemm.sh; it alternates itself)
#   gpt        (b) GPT training iterations/s at the core config (4 layers, 4 heads, 128 wide, block 64,
#                  batch 12) on tinyshakespeare, ITERS steps each side; loss curves at equal steps;
#                  peak RSS of training
#   mt         (c) encoder-decoder training target tokens/s at the Multi30k config (all 29,000 pairs:
#                  vocab 8018/6277, d_model 256, 3+3 layers, 8 heads, FFN 512, dropout 0.1, label
#                  smoothing 0.1, batch 64, bucketing), MT_STEPS steps each side, peak RSS
#   translate  (e) translation sentences/s with beam 4 on Multi30k test_2016_flickr; both sides decode
#                  with the weights tfm trained in `mt` (the twin loads them), so they decode the same
#                  sentences to the same lengths (implies mt)
#   gen        (d) GPT generation tokens/s: 256 new tokens, 4 layers, 128 wide, block 256 (tfm: KV cache;
#                  PyTorch: full forward per token, scripts/bench_generate_torch.py)
# --quick: 1 round, 40 GPT steps, 30 Multi30k steps, 200 test sentences, short GEMM runs.
# Defaults: 3 rounds, 100 GPT steps (after 1 warm-up step), 100 Multi30k steps, all 1000 test sentences.
# The load average is printed before each workload: numbers taken on a busy machine are not comparable
# (with 2 threads on 2 busy cores both sides lose most of their time in OpenMP barriers; PyTorch more so).
# --threads N (default 2) runs both sides with N threads (the GEMM part always measures 1 and 2).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=/usr/bin/python3
BUILD=build
ROUNDS=3
QUICK=0
THREADS=2
which=()
while [ $# -gt 0 ]; do
    case "$1" in
        --quick) QUICK=1; ROUNDS=1 ;;
        --rounds) ROUNDS=$2; shift ;;
        --build) BUILD=$2; shift ;;
        --threads) THREADS=$2; shift ;;
        -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
        all|gemm|gpt|mt|gen|translate) which+=("$1") ;;
        *) echo "bench/run.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
    shift
done
[ ${#which[@]} -eq 0 ] && which=(all)
want() { local w; for w in "${which[@]}"; do [ "$w" = all ] || [ "$w" = "$1" ] && return 0; done; return 1; }
if [ $QUICK = 1 ]; then GPT_ITERS=40; MT_STEPS=30; TEST_N=200; GEMM_ARGS="--rounds 1 --ms 100"
else GPT_ITERS=100; MT_STEPS=100; TEST_N=1000; GEMM_ARGS="--rounds 3"; fi

export OMP_NUM_THREADS=$THREADS
# PyTorch side: Debian's torch does its GEMMs in the system BLAS (OpenBLAS, with its own thread pool).
# Its OpenMP pool and OpenBLAS's pool together oversubscribe 2 cores: measured on the GPT config,
# 4.0 it/s with torch 2 threads + OpenBLAS 2, 11.1 with torch 2 + OpenBLAS 1, 14.7 with torch 1 +
# OpenBLAS 2 (its fastest). So PyTorch runs with OpenBLAS on $THREADS threads and 1 intra-op thread.
PY="env OPENBLAS_NUM_THREADS=$THREADS OMP_NUM_THREADS=1 $PY"
TORCH_THREADS=1
TFM="$BUILD/tfm"
DATA=/work/shared/data
[ -d "$DATA" ] || DATA=../shared/data
SHAKES=$DATA/tinyshakespeare/input.txt
M30K=$DATA/multi30k
TMP=$(mktemp -d /tmp/tfm_bench.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
[ -x "$TFM" ] || make --no-print-directory -j2 BUILD="$BUILD" "$TFM" >/dev/null
echo "# tfm bench/run.sh $(date -u +%Y-%m-%dT%H:%MZ) on $(lscpu | sed -n 's/^Model name: *//p'), $(nproc --all) cores;" \
     "torch $($PY -c 'import torch; print(torch.__version__)'); rounds $ROUNDS; $(git log -1 --format=%h)"

median() { sort -g | awk '{a[NR]=$1} END {if (NR==0) {print "nan"; exit} if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "nan" }'; }
row() { # name unit tfm_values torch_values (space-separated lists)
    local t p
    t=$(echo "$3" | tr ' ' '\n' | grep . | median); p=$(echo "$4" | tr ' ' '\n' | grep . | median)
    printf '%-44s %12s %12s %8s   (tfm: %s | torch: %s)\n' "$1 [$2]" "$t" "$p" "$(ratio "$t" "$p")" "$3" "$4"
}
header() { echo; echo "== $1   (load average:$(uptime | sed 's/.*load average://'))"; printf '%-44s %12s %12s %8s\n' "" tfm torch "tfm/torch"; }

# ---------------------------------------------------------------- (a) GEMM
if want gemm; then
    echo; echo "== (a) GEMM GFLOP/s, tfm vs OpenBLAS   (load average:$(uptime | sed 's/.*load average://'))"
    # shellcheck disable=SC2086
    OMP_NUM_THREADS= bash bench/gemm.sh --threads 1,2 $GEMM_ARGS
fi

# ---------------------------------------------------------------- (b) GPT training
if want gpt; then
    header "(b) GPT training, core config, $GPT_ITERS steps, $THREADS threads"
    t_ips=""; p_ips=""; t_rss=""; p_rss=""
    for r in $(seq "$ROUNDS"); do
        for side in $( [ $((r % 2)) = 1 ] && echo "tfm torch" || echo "torch tfm"); do
            if [ $side = tfm ]; then
                "$TFM" train-lm --data "$SHAKES" --out "$TMP/gpt.tfm" --iters $((GPT_ITERS + 1)) --eval-every 100000 \
                    --eval-iters 1 --threads $THREADS --log-every 10 --profile 2>"$TMP/tfm_gpt.$r.log"
                # ms/step over all steps (the first, warm-up step included; the torch twin's iters_per_s likewise)
                ms=$(awk '/^done:/ {gsub(/[(]/,""); for (i=1;i<=NF;i++) if ($(i)=="ms/step,") print $(i-1)}' "$TMP/tfm_gpt.$r.log")
                t_ips="$t_ips $(awk -v m="$ms" 'BEGIN {printf "%.2f", 1000 / m}')"
                t_rss="$t_rss $(sed -n 's/.*peak RSS \([0-9.]*\) MiB.*/\1/p' "$TMP/tfm_gpt.$r.log")"
            else
                $PY scripts/bench_gpt_torch.py --iters $((GPT_ITERS + 1)) --threads $TORCH_THREADS --eval-iters 1 --log-every 1 \
                    --data "$SHAKES" >"$TMP/torch_gpt.$r.log" 2>&1
                p_ips="$p_ips $(sed -n 's/^iters_per_s //p' "$TMP/torch_gpt.$r.log")"
                p_rss="$p_rss $(sed -n 's/^peak_rss_mb //p' "$TMP/torch_gpt.$r.log")"
            fi
        done
    done
    row "GPT training iterations/s" "it/s" "$t_ips" "$p_ips"
    row "GPT training peak RSS (lower is better)" "MiB" "$t_rss" "$p_rss"
    echo "loss at equal steps (round 1; different random inits, same recipe and data):"
    printf '  %6s %10s %10s\n' step tfm torch
    # tfm logs "step k/N | loss X" after k steps (every 10); torch logs "iter i loss X" for step i+1 (every step)
    awk 'NR == FNR { if ($1 == "iter") t[$2 + 1] = $4; next }
         $1 == "step" { split($2, a, "/"); if (a[1] in t) printf "  %6d %10s %10s\n", a[1], $5, t[a[1]] }' \
        "$TMP/torch_gpt.1.log" "$TMP/tfm_gpt.1.log"
    echo "tfm per-op profile (round 1):"; sed -n '/^profile/,/^tfm train-lm: peak/p' "$TMP/tfm_gpt.1.log" | sed 's/^/  /'
fi

# ---------------------------------------------------------------- (c) MT training, (e) translation
if want mt || want translate; then
    header "(c) encoder-decoder training, Multi30k (29,000 pairs), $MT_STEPS steps, $THREADS threads"
    COMMON="--preprocess moses --min-freq 2 --max-len 40 --d-model 256 --n-head 8 --n-layer 3 --ffn 512 --dropout 0.1
      --label-smoothing 0.1 --schedule noam --lr 0.3 --warmup 100 --batch-size 64 --bucket 8 --epochs 1
      --num-examples 0 --max-steps $MT_STEPS --seed 1 --threads $THREADS"
    head -n "$TEST_N" "$M30K/test_2016_flickr.de" > "$TMP/test.de"
    head -n "$TEST_N" "$M30K/test_2016_flickr.en" > "$TMP/test.en"
    # shellcheck disable=SC2086
    "$TFM" train-mt --src "$TMP/test.de" --tgt "$TMP/test.en" --preprocess moses --out "$TMP/unused.tfm" \
        --dump-data "$TMP/test" --dump-only >/dev/null 2>&1
    t_tok=""; p_tok=""; t_rss=""; p_rss=""; t_snt=""; p_snt=""
    for r in $(seq "$ROUNDS"); do
        for side in $( [ $((r % 2)) = 1 ] && echo "tfm torch" || echo "torch tfm"); do
            if [ $side = tfm ]; then
                # shellcheck disable=SC2086
                "$TFM" train-mt --src $M30K/train.de --tgt $M30K/train.en $COMMON --out "$TMP/mt.tfm" \
                    --dump-data "$TMP/m30k" --log-every 10 2>"$TMP/tfm_mt.$r.log"
                t_tok="$t_tok $(grep -o '[0-9]* tok/s' "$TMP/tfm_mt.$r.log" | tail -1 | cut -d' ' -f1)"
                t_rss="$t_rss $(sed -n 's/.*train-mt: peak RSS \([0-9.]*\) MiB.*/\1/p' "$TMP/tfm_mt.$r.log")"
                if want translate; then
                    s=$(date +%s.%N)
                    "$TFM" translate "$TMP/mt.tfm" --beam 4 --alpha 0.6 --max-len 60 --threads $THREADS <"$TMP/test.de" \
                        >"$TMP/tfm_beam4.en" 2>"$TMP/tfm_tr.$r.log"
                    e=$(date +%s.%N)
                    t_snt="$t_snt $(awk -v n="$TEST_N" -v s="$s" -v e="$e" 'BEGIN {printf "%.1f", n / (e - s)}')"
                fi
            else
                [ -f "$TMP/m30k.train.src" ] || { echo "(torch side needs the tfm dump first)"; continue; }
                # shellcheck disable=SC2046
                $PY scripts/bench_mt_torch.py --data "$TMP/m30k" --test "$TMP/test.train.src" --threads $TORCH_THREADS \
                    --max-steps $MT_STEPS --out "$TMP" $(want translate && echo --decode-weights "$TMP/mt.tfm" || echo --no-decode) \
                    >"$TMP/torch_mt.$r.log" 2>&1
                p_tok="$p_tok $(sed -n 's/^torch train:.* = \([0-9]*\) tok\/s.*/\1/p' "$TMP/torch_mt.$r.log")"
                p_snt="$p_snt $(sed -n 's/^torch beam 4:.* = \([0-9.]*\) sentences\/s.*/\1/p' "$TMP/torch_mt.$r.log")"
                p_rss="$p_rss $(awk '/^peak_rss_mb/ {print $2}' "$TMP/torch_mt.$r.log")"
            fi
        done
    done
    row "MT training target tokens/s" "tok/s" "$t_tok" "$p_tok"
    [ -n "$p_rss" ] && row "MT training peak RSS (lower is better)" "MiB" "$t_rss" "$p_rss" \
        || echo "MT training peak RSS [MiB]: tfm $t_rss (torch script does not report it)"
    if want translate; then
        header "(e) translation, beam 4, $TEST_N sentences of test_2016_flickr (both sides decode tfm's trained weights)"
        row "translation sentences/s (beam 4)" "sent/s" "$t_snt" "$p_snt"
        same=$(paste -d '\t' "$TMP/tfm_beam4.en" "$TMP/torch_beam4.en" | awk -F '\t' '$1 == $2' | wc -l)
        echo "identical translations (last round, same weights): $same of $TEST_N"
    fi
fi

# ---------------------------------------------------------------- (d) generation
if want gen; then
    header "(d) GPT generation, 256 new tokens, 4 layers, 128 wide, block 256"
    "$TFM" train-lm --data "$SHAKES" --out "$TMP/gen.tfm" --iters 1 --block-size 256 --batch-size 1 \
        --eval-every 100000 --eval-iters 1 --threads $THREADS 2>/dev/null
    t_tps=""; p_tps=""; n_tps=""
    for r in $(seq "$ROUNDS"); do
        for side in $( [ $((r % 2)) = 1 ] && echo "tfm torch" || echo "torch tfm"); do
            if [ $side = tfm ]; then
                "$TFM" generate "$TMP/gen.tfm" --tokens 256 --seed $r --threads $THREADS >/dev/null 2>"$TMP/tfm_gen.$r.log"
                t_tps="$t_tps $(sed -n 's/^generated .*(\([0-9.]*\) tok\/s.*/\1/p' "$TMP/tfm_gen.$r.log")"
                "$TFM" generate "$TMP/gen.tfm" --tokens 256 --seed $r --threads $THREADS --no-kv-cache >/dev/null \
                    2>"$TMP/tfm_gen_nc.$r.log"
                n_tps="$n_tps $(sed -n 's/^generated .*(\([0-9.]*\) tok\/s.*/\1/p' "$TMP/tfm_gen_nc.$r.log")"
            else
                $PY scripts/bench_generate_torch.py --tokens 256 --block-size 256 --threads $TORCH_THREADS --seed $r \
                    >"$TMP/torch_gen.$r.log" 2>&1
                p_tps="$p_tps $(sed -n 's/^tokens_per_s //p' "$TMP/torch_gen.$r.log")"
            fi
        done
    done
    row "generation tokens/s (tfm KV cache)" "tok/s" "$t_tps" "$p_tps"
    row "generation tokens/s (tfm --no-kv-cache)" "tok/s" "$n_tps" "$p_tps"
fi
