#!/usr/bin/env bash
# tfm vs PyTorch, side by side, in one run (issue 5). Each workload runs tfm and its PyTorch twin
# alternately (the order flips every round), ROUNDS times, 2 threads each side, and prints the median
# of each side and the tfm/PyTorch ratio (> 1 means tfm is faster; for RSS, < 1 means tfm uses less);
# under each speed, the ratio of every round's two sides and their median (less sensitive to a phase of the
# machine that favours one side's rounds).
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
#
# PyTorch at its best: the header prints the CPU (model, ISA flags), what libblas.so.3 resolves to and
# which BLAS / OpenBLAS core and threading torch really loads (bench/sysinfo.sh, scripts/torch_setup.py).
# With the OpenMP OpenBLAS (Debian libopenblas0-openmp, selected for libblas.so.3) torch and OpenBLAS share
# one OpenMP pool, so torch runs with N intra-op threads; before each workload a short calibration run
# tries every configuration (torch threads N..1 x oneDNN on/off; with a pthread OpenBLAS also torch 1 +
# OpenBLAS N) and the rounds use the fastest, all printed. --setup-blas (as root) installs/selects
# libopenblas0-openmp first. --torch-configs "2:on,2:off:skx" overrides the list (threads:oneDNN[:pt][:skx][:a512]).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=/usr/bin/python3
BUILD=build
ROUNDS=3
QUICK=0
THREADS=2
SETUP_BLAS=0
TORCH_CONFIGS=""
which=()
while [ $# -gt 0 ]; do
    case "$1" in
        --quick) QUICK=1; ROUNDS=1 ;;
        --rounds) ROUNDS=$2; shift ;;
        --build) BUILD=$2; shift ;;
        --threads) THREADS=$2; shift ;;
        --setup-blas) SETUP_BLAS=1 ;;
        --torch-configs) TORCH_CONFIGS=$2; shift ;;
        -h|--help) sed -n '2,31p' "$0"; exit 0 ;;
        all|gemm|gpt|mt|gen|translate) which+=("$1") ;;
        *) echo "bench/run.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
    shift
done
[ ${#which[@]} -eq 0 ] && which=(all)
want() { local w; for w in "${which[@]}"; do [ "$w" = all ] || [ "$w" = "$1" ] && return 0; done; return 1; }
if [ $QUICK = 1 ]; then GPT_ITERS=40; MT_STEPS=30; TEST_N=200; GEMM_ARGS="--rounds 1 --ms 100"; CAL_GPT=10; CAL_MT=8
else GPT_ITERS=100; MT_STEPS=100; TEST_N=1000; GEMM_ARGS="--rounds 3"; CAL_GPT=30; CAL_MT=20; fi

export OMP_NUM_THREADS=$THREADS
BLAS_ALT=libblas.so.3-x86_64-linux-gnu
OPENMP_BLAS=/usr/lib/x86_64-linux-gnu/openblas-openmp/libblas.so.3
if [ $SETUP_BLAS = 1 ]; then
    [ "$(id -u)" = 0 ] || { echo "bench/run.sh: --setup-blas needs root (apt-get, update-alternatives)" >&2; exit 2; }
    dpkg -s libopenblas0-openmp >/dev/null 2>&1 || apt-get install -y libopenblas0-openmp
    update-alternatives --set $BLAS_ALT $OPENMP_BLAS
fi
case "$(update-alternatives --query $BLAS_ALT 2>/dev/null | sed -n 's/^Value: //p')" in
    *openblas-openmp*) BLAS_KIND=openmp ;;
    *openblas*) BLAS_KIND=pthread ;;
    *) BLAS_KIND=other ;;
esac
# PyTorch configurations "threads:oneDNN[:flag...]". Flags: pt = torch 1 intra-op thread with a pthread
# OpenBLAS on $THREADS threads (the best layout when the two pools cannot be shared); skx = OpenBLAS's
# AVX-512 kernels (OPENBLAS_CORETYPE=SkylakeX: OpenBLAS 0.3.21 takes an AMD CPU it does not know, such as
# Zen 4/5, for a Haswell and uses its AVX2 kernels); a512 = torch's AVX-512 kernels
# (ATEN_CPU_CAPABILITY=avx512; Debian's torch is built with them but picks AVX2 on AMD CPUs).
# The AVX-512 variants are tried only where the CPU has AVX-512.
if [ -z "$TORCH_CONFIGS" ]; then
    extra=""; grep -qw avx512f /proc/cpuinfo && extra=": :skx :a512 :skx:a512"
    for t in $(seq "$THREADS" -1 1); do
        for m in on off; do
            for x in ${extra:-:}; do
                x=${x#:}; TORCH_CONFIGS="$TORCH_CONFIGS,$t:$m${x:+:$x}"
            done
        done
        extra=""   # fewer threads than cores never won; their AVX-512 variants are not tried
    done
    [ $BLAS_KIND = openmp ] || TORCH_CONFIGS="$TORCH_CONFIGS,1:on:pt,1:off:pt"
fi
TORCH_CONFIGS=$(echo "$TORCH_CONFIGS" | tr ',' ' ' | sed 's/^ *//')
has_flag() { case ":$1:" in *":$2:"*) return 0 ;; *) return 1 ;; esac; }
torch_py() { # CONFIG -> the command prefix: environment, python, then the script and its args follow
    local t env
    t=${1%%:*}
    if has_flag "$1" pt; then env="OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=$THREADS"
    else env="OMP_NUM_THREADS=$t OPENBLAS_NUM_THREADS=$t"; fi
    has_flag "$1" skx && env="$env OPENBLAS_CORETYPE=SkylakeX"
    has_flag "$1" a512 && env="$env ATEN_CPU_CAPABILITY=avx512"
    echo "env $env $PY"
}
torch_args() { local t m rest; IFS=: read -r t m rest <<<"$1"; echo "--threads $t --mkldnn $m"; }
torch_desc() {
    local t m rest d; IFS=: read -r t m rest <<<"$1"
    if has_flag "$1" pt; then d="torch 1 thread + OpenBLAS $THREADS threads, oneDNN $m"
    else d="torch $t threads ($BLAS_KIND BLAS on the same $t), oneDNN $m"; fi
    has_flag "$1" skx && d="$d, OpenBLAS SkylakeX"
    has_flag "$1" a512 && d="$d, ATen avx512"
    echo "$d"
}
# pick_torch SED_PATTERN SCRIPT ARGS...: one short run per configuration, prints each rate, sets BEST
pick_torch() {
    local pat=$1 c v bestv=0; shift
    BEST=""
    for c in $TORCH_CONFIGS; do
        # shellcheck disable=SC2046
        v=$($(torch_py "$c") "$@" $(torch_args "$c") 2>&1 | sed -n "$pat" | tail -n 1)
        printf '  calibration: %-52s %s\n' "$(torch_desc "$c")" "${v:-failed}"
        if [ -n "$v" ] && awk -v a="$v" -v b="$bestv" 'BEGIN { exit !(a + 0 > b + 0) }'; then BEST=$c; bestv=$v; fi
    done
    [ -n "$BEST" ] || { echo "  calibration: every PyTorch configuration failed" >&2; BEST=${TORCH_CONFIGS%% *}; }
    echo "  PyTorch runs with the fastest: $(torch_desc "$BEST")"
}
TFM="$BUILD/tfm"
DATA=/work/shared/data
[ -d "$DATA" ] || DATA=../shared/data
SHAKES=$DATA/tinyshakespeare/input.txt
M30K=$DATA/multi30k
TMP=$(mktemp -d /tmp/tfm_bench.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
[ -x "$TFM" ] || make --no-print-directory -j2 BUILD="$BUILD" "$TFM" >/dev/null
echo "# tfm bench/run.sh $(date -u +%Y-%m-%dT%H:%MZ); rounds $ROUNDS; $THREADS threads; $(git log -1 --format=%h)"
env OMP_NUM_THREADS=$THREADS bash bench/sysinfo.sh "$PY"
best_isa=generic; grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo && best_isa=avx2
grep -qw avx512f /proc/cpuinfo && best_isa=avx512
echo "# tfm kernels: ${TFM_ISA:-$best_isa} (chosen at run time from cpuid; TFM_ISA=${TFM_ISA:-unset});" \
     "PyTorch configurations to try: $TORCH_CONFIGS"

median() { sort -g | awk '{a[NR]=$1} END {if (NR==0) {print "nan"; exit} if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "nan" }'; }
row() { # name unit tfm_values torch_values [paired] (space-separated lists)
    local t p
    t=$(echo "$3" | tr ' ' '\n' | grep . | median); p=$(echo "$4" | tr ' ' '\n' | grep . | median)
    printf '%-44s %12s %12s %8s   (tfm: %s | torch: %s)\n' "$1 [$2]" "$t" "$p" "$(ratio "$t" "$p")" "$3" "$4"
    if [ "${5:-}" = paired ]; then paired "$3" "$4"; fi
}
# paired tfm_values torch_values: each round's tfm/torch ratio (the two sides of a round run back to back, so
# a phase of the machine that lasts a round or more slows both), and their median. Printed under the row;
# the row's ratio of medians can mix a fast phase of one side with a slow one of the other.
paired() {
    local r
    r=$(paste -d' ' <(echo "$1" | tr ' ' '\n' | grep .) <(echo "$2" | tr ' ' '\n' | grep .) |
        awk 'NF == 2 && $2 > 0 { printf "%.2f ", $1 / $2 }')
    if [ -n "$r" ]; then
        printf '%-44s %34s   (per round: %s)\n' "  per-round ratio, median" \
            "$(echo "$r" | tr ' ' '\n' | grep . | median | awk '{printf "%.2f", $1}')" "${r% }"
    fi
}
header() { echo; echo "== $1   (load average:$(uptime | sed 's/.*load average://'))"; printf '%-44s %12s %12s %8s\n' "" tfm torch "tfm/torch"; }

# ---------------------------------------------------------------- (a) GEMM
if want gemm; then
    echo; echo "== (a) GEMM GFLOP/s, tfm vs OpenBLAS   (load average:$(uptime | sed 's/.*load average://'))"
    # shellcheck disable=SC2086
    env -u OMP_NUM_THREADS bash bench/gemm.sh --threads 1,2 $GEMM_ARGS
fi

# ---------------------------------------------------------------- (b) GPT training
if want gpt; then
    header "(b) GPT training, core config, $GPT_ITERS steps, $THREADS threads"
    pick_torch 's/^iters_per_s //p' scripts/bench_gpt_torch.py --iters "$CAL_GPT" --eval-iters 1 --log-every 1000 \
        --data "$SHAKES"
    TORCH_GPT=$BEST
    t_ips=""; p_ips=""; t_rss=""; p_rss=""
    for r in $(seq "$ROUNDS"); do
        for side in $( [ $((r % 2)) = 1 ] && echo "tfm torch" || echo "torch tfm"); do
            if [ $side = tfm ]; then
                "$TFM" train-lm --data "$SHAKES" --out "$TMP/gpt.tfm" --overwrite --iters $((GPT_ITERS + 1)) --eval-every 100000 --seed 1337 \
                    --eval-iters 1 --threads $THREADS --log-every 10 2>"$TMP/tfm_gpt.$r.log"   # timed: no --profile
                # ms/step over all steps (the first, warm-up step included; the torch twin's iters_per_s likewise)
                ms=$(awk '/^done:/ {gsub(/[(]/,""); for (i=1;i<=NF;i++) if ($(i)=="ms/step,") print $(i-1)}' "$TMP/tfm_gpt.$r.log")
                t_ips="$t_ips $(awk -v m="$ms" 'BEGIN {printf "%.2f", 1000 / m}')"
                t_rss="$t_rss $(sed -n 's/.*peak RSS \([0-9.]*\) MiB.*/\1/p' "$TMP/tfm_gpt.$r.log")"
            else
                # shellcheck disable=SC2046
                $(torch_py "$TORCH_GPT") scripts/bench_gpt_torch.py --iters $((GPT_ITERS + 1)) $(torch_args "$TORCH_GPT") \
                    --eval-iters 1 --log-every 1 --data "$SHAKES" >"$TMP/torch_gpt.$r.log" 2>&1
                p_ips="$p_ips $(sed -n 's/^iters_per_s //p' "$TMP/torch_gpt.$r.log")"
                p_rss="$p_rss $(sed -n 's/^peak_rss_mb //p' "$TMP/torch_gpt.$r.log")"
            fi
        done
    done
    echo "tfm: $(grep -o 'gemm [a-z0-9-]*' "$TMP/tfm_gpt.1.log" | head -n 1) kernels; PyTorch: $(torch_desc "$TORCH_GPT")"
    row "GPT training iterations/s" "it/s" "$t_ips" "$p_ips" paired
    row "GPT training peak RSS (lower is better)" "MiB" "$t_rss" "$p_rss"
    echo "loss at equal steps (round 1; different random inits, same recipe and data; tfm: mean of the 10 steps to it):"
    printf '  %6s %10s %10s\n' step tfm torch
    # tfm logs "step k/N | loss X (mean of 10)" after k steps (every 10: the mean of steps k-9..k, as its
    # --log-file); torch logs "iter i loss X" for step i+1 (every step, one step's loss)
    awk 'NR == FNR { if ($1 == "iter") t[$2 + 1] = $4; next }
         $1 == "step" { split($2, a, "/"); if (a[1] in t) printf "  %6d %10s %10s\n", a[1], $5, t[a[1]] }' \
        "$TMP/torch_gpt.1.log" "$TMP/tfm_gpt.1.log"
    # the per-op profile from an extra, untimed run: --profile's timers cost time of their own
    "$TFM" train-lm --data "$SHAKES" --out "$TMP/gpt.tfm" --overwrite --iters $((GPT_ITERS + 1)) --eval-every 100000 --seed 1337 \
        --eval-iters 1 --threads $THREADS --log-every 1000 --profile 2>"$TMP/tfm_gpt.prof.log"
    echo "tfm per-op profile (an extra run, not timed):"
    sed -n '/^profile/,/^tfm train-lm: peak/p' "$TMP/tfm_gpt.prof.log" | sed 's/^/  /'
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
    "$TFM" train-mt --src "$TMP/test.de" --tgt "$TMP/test.en" --preprocess moses --max-len 40 --allow-truncation \
        --out "$TMP/unused.tfm" --dump-data "$TMP/test" --dump-only >/dev/null 2>&1
    # the tokenized corpus for the PyTorch side (the tfm rounds write the same dump again)
    # shellcheck disable=SC2086
    "$TFM" train-mt --src $M30K/train.de --tgt $M30K/train.en $COMMON --out "$TMP/unused2.tfm" \
        --dump-data "$TMP/m30k" --dump-only >/dev/null 2>&1
    mkdir -p "$TMP/cal"
    pick_torch 's/^torch train:.* = \([0-9]*\) tok\/s.*/\1/p' scripts/bench_mt_torch.py --data "$TMP/m30k" \
        --test "$TMP/test.train.src" --max-steps "$CAL_MT" --out "$TMP/cal" --no-decode
    TORCH_MT=$BEST
    t_tok=""; p_tok=""; t_rss=""; p_rss=""; t_snt=""; p_snt=""
    for r in $(seq "$ROUNDS"); do
        for side in $( [ $((r % 2)) = 1 ] && echo "tfm torch" || echo "torch tfm"); do
            if [ $side = tfm ]; then
                # shellcheck disable=SC2086
                "$TFM" train-mt --src $M30K/train.de --tgt $M30K/train.en $COMMON --out "$TMP/mt.tfm" --overwrite \
                    --dump-data "$TMP/m30k" --log-every 10 2>"$TMP/tfm_mt.$r.log"
                t_tok="$t_tok $(grep -o '[0-9]* tok/s' "$TMP/tfm_mt.$r.log" | tail -1 | cut -d' ' -f1)"
                t_rss="$t_rss $(sed -n 's/.*train-mt: peak RSS \([0-9.]*\) MiB.*/\1/p' "$TMP/tfm_mt.$r.log")"
            else
                [ -f "$TMP/m30k.train.src" ] || { echo "(torch side needs the tfm dump first)"; continue; }
                # shellcheck disable=SC2046
                $(torch_py "$TORCH_MT") scripts/bench_mt_torch.py --data "$TMP/m30k" --test "$TMP/test.train.src" \
                    $(torch_args "$TORCH_MT") --max-steps $MT_STEPS --out "$TMP" --no-decode >"$TMP/torch_mt.$r.log" 2>&1
                p_tok="$p_tok $(sed -n 's/^torch train:.* = \([0-9]*\) tok\/s.*/\1/p' "$TMP/torch_mt.$r.log")"
                p_rss="$p_rss $(awk '/^peak_rss_mb/ {print $2}' "$TMP/torch_mt.$r.log")"
            fi
        done
    done
    echo "PyTorch: $(torch_desc "$TORCH_MT")"
    row "MT training target tokens/s" "tok/s" "$t_tok" "$p_tok" paired
    [ -n "$p_rss" ] && row "MT training peak RSS (lower is better)" "MiB" "$t_rss" "$p_rss" \
        || echo "MT training peak RSS [MiB]: tfm $t_rss (torch script does not report it)"
    if want translate; then
        # both sides decode the weights of tfm's last training round; PyTorch with the configuration fastest at
        # decoding (calibrated here, not the training one), its KV-cached beam search over the same batches of 32
        header "(e) translation, beam 4, $TEST_N sentences of test_2016_flickr (both sides decode tfm's trained weights)"
        mkdir -p "$TMP/cal_dec"
        pick_torch 's/^torch beam 4:.* = \([0-9.]*\) sentences\/s.*/\1/p' scripts/bench_mt_torch.py --data "$TMP/m30k" \
            --test "$TMP/test.train.src" --decode-only --decode-weights "$TMP/mt.tfm" --out "$TMP/cal_dec"
        TORCH_DEC=$BEST
        for r in $(seq "$ROUNDS"); do
            for side in $( [ $((r % 2)) = 1 ] && echo "tfm torch" || echo "torch tfm"); do
                if [ $side = tfm ]; then
                    s=$(date +%s.%N)
                    "$TFM" translate "$TMP/mt.tfm" --beam 4 --alpha 0.6 --max-output 60 --threads $THREADS <"$TMP/test.de" \
                        >"$TMP/tfm_beam4.en" 2>"$TMP/tfm_tr.$r.log"
                    e=$(date +%s.%N)
                    t_snt="$t_snt $(awk -v n="$TEST_N" -v s="$s" -v e="$e" 'BEGIN {printf "%.1f", n / (e - s)}')"
                else
                    # shellcheck disable=SC2046
                    $(torch_py "$TORCH_DEC") scripts/bench_mt_torch.py --data "$TMP/m30k" --test "$TMP/test.train.src" \
                        $(torch_args "$TORCH_DEC") --decode-only --decode-weights "$TMP/mt.tfm" --out "$TMP" \
                        >"$TMP/torch_tr.$r.log" 2>&1
                    p_snt="$p_snt $(sed -n 's/^torch beam 4:.* = \([0-9.]*\) sentences\/s.*/\1/p' "$TMP/torch_tr.$r.log")"
                fi
            done
        done
        echo "tfm: $THREADS threads (translate decodes its batches of 32 in parallel, one per thread); PyTorch: $(torch_desc "$TORCH_DEC")"
        row "translation sentences/s (beam 4)" "sent/s" "$t_snt" "$p_snt" paired
        same=$(paste -d '\t' "$TMP/tfm_beam4.en" "$TMP/torch_beam4.en" | awk -F '\t' '$1 == $2' | wc -l)
        echo "identical translations (last round, same weights): $same of $TEST_N"
    fi
fi

# ---------------------------------------------------------------- (d) generation
if want gen; then
    header "(d) GPT generation, 256 new tokens, 4 layers, 128 wide, block 256"
    "$TFM" train-lm --data "$SHAKES" --out "$TMP/gen.tfm" --iters 1 --block-size 256 --batch-size 1 \
        --eval-every 100000 --eval-iters 1 --threads $THREADS 2>/dev/null
    pick_torch 's/^tokens_per_s //p' scripts/bench_generate_torch.py --tokens 64 --block-size 256 --seed 1
    TORCH_GEN=$BEST
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
                # shellcheck disable=SC2046
                $(torch_py "$TORCH_GEN") scripts/bench_generate_torch.py --tokens 256 --block-size 256 \
                    $(torch_args "$TORCH_GEN") --seed $r >"$TMP/torch_gen.$r.log" 2>&1
                p_tps="$p_tps $(sed -n 's/^tokens_per_s //p' "$TMP/torch_gen.$r.log")"
            fi
        done
    done
    echo "PyTorch: $(torch_desc "$TORCH_GEN")"
    row "generation tokens/s (tfm KV cache)" "tok/s" "$t_tps" "$p_tps" paired
    row "generation tokens/s (tfm --no-kv-cache)" "tok/s" "$n_tps" "$p_tps"
fi
