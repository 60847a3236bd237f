#!/usr/bin/env bash
# Share of the machine's FP32 FMA peak that a GPT training step reaches (issue 12).
#  - The peak is measured, not computed from the nominal clock (a VM reports its base clock, the core
#    runs at another): bench/fma_peak.c, independent FMAs of the widest vector (16-wide where the CPU has
#    AVX-512, else 8-wide) on every thread, best of 5.
#  - The step's work is counted the way nanoGPT's estimate_mfu and the PaLM paper (appendix B) do:
#    flops per token = 6 x (matmul weights) + 12 x layers x width x block (attention scores and weighted
#    sum over the full block, forward + backward), matmul weights = layers x 12 width^2 + vocab x width
#    (the output layer). Work that is not a matmul (layernorm, GELU, softmax, the optimizer) is not
#    counted, as in those formulas.
#  - The step time is train-lm's own "done" line (training steps only), median of the rounds.
#  - A VM's FMA throughput can drift within seconds (another tenant on the same physical core): each round
#    is bracketed by two short probes (best of 5 x 0.1 s on the same threads), and the share of the peak
#    probed around each run is printed per round, with its median, beside the share of the peak measured
#    once at the start.
#  - Then, step by step (bench/peak_steps.c, linked with the build's libtfm.a): --steps steps of the same
#    training through the library with a 2 ms probe after every step; the median of all steps and of the
#    quiet ones (both probes around them >= 95% of the best) against the best probe, and whether the
#    probes explain the slow steps at all (the median step after the lowest and the highest quarter).
#   bench/peak.sh [--iters N] [--rounds R] [--threads T] [--steps S]
#                 (defaults 100, 3, all cores, 400; the GPT baby config)
set -u
cd "$(dirname "$0")/.."
iters=100 rounds=3 threads=$(nproc) steps=400
while [ $# -gt 0 ]; do
    case $1 in
        --iters) iters=${2:?}; shift ;;
        --rounds) rounds=${2:?}; shift ;;
        --threads) threads=${2:?}; shift ;;
        --steps) steps=${2:?}; shift ;;
        -h|--help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "bench/peak.sh: unknown argument '$1' (--iters N, --rounds R, --threads T, --steps S)" >&2; exit 2 ;;
    esac
    shift
done
TFM=${TFM:-build/tfm}
D=../shared/data/tinyshakespeare/input.txt
LIB=$(dirname "$TFM")/libtfm.a
[ -x "$TFM" ] && [ -f "$LIB" ] && [ -f "$D" ] || { echo "bench/peak.sh: needs $TFM and $LIB (make) and $D" >&2; exit 1; }
bash bench/sysinfo.sh
echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(git log -1 --format=%h 2>/dev/null); loadavg at start $(cut -d' ' -f1-3 /proc/loadavg)"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
${CC:-cc} -O2 -fopenmp bench/fma_peak.c -o "$out/fma_peak" || exit 1
${CC:-cc} -std=c11 -D_GNU_SOURCE -O2 -fopenmp -Iinclude bench/peak_steps.c "$LIB" -fopenmp -lm -o "$out/peak_steps" || exit 1
OMP_NUM_THREADS=$threads "$out/fma_peak" 1 | tee "$out/peak.txt"
peak=$(sed -n "s/^fma_peak: $threads threads\{0,1\}: \([0-9.]*\) GFLOP.*/\1/p" "$out/peak.txt")
L=4 H=4 C=128 T=64 B=12
probe() { "$out/fma_peak" 0.1 "$threads" | sed -n 's/.*: \([0-9.]*\) GFLOP.*/\1/p'; }
for r in $(seq "$rounds"); do
    before=$(probe)
    "$TFM" train-lm --data "$D" --out "$out/g.tfm" --overwrite --iters "$iters" --eval-every 100000 --eval-iters 1 \
        --n-layer $L --n-head $H --n-embd $C --block-size $T --batch-size $B --threads "$threads" >"$out/run.txt" 2>&1 \
        || { cat "$out/run.txt" >&2; exit 1; }
    sed -n 's/.*steps in .* (\([0-9.]*\) ms\/step.*/\1/p' "$out/run.txt" >>"$out/ms.txt"
    echo "$before $(probe) $(tail -n 1 "$out/ms.txt")" >>"$out/rounds.txt"
done
V=$(sed -n 's/.*, vocab \([0-9]*\).*/\1/p' "$out/run.txt" | head -n 1)
ms=$(sort -g "$out/ms.txt" | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
w=$((L * 12 * C * C + V * C))                # matmul weights
step=$(((6 * w + 12 * L * C * T) * B * T))   # flops a step
awk -v L=$L -v C=$C -v T=$T -v B=$B -v V="$V" -v w="$w" -v step="$step" -v ms="$ms" -v peak="$peak" -v th="$threads" \
    -v all="$(tr '\n' ' ' <"$out/ms.txt")" 'BEGIN {
    printf "GPT baby config (%d layers, width %d, block %d, batch %d, vocab %d): %.0f matmul weights, %.3f GFLOP per step\n", L, C, T, B, V, w, step / 1e9
    printf "step time, %d threads: %s ms (median of: %s)\n", th, ms, all
    printf "achieved: %.1f GFLOP/s = %.1f%% of the measured FMA peak of %s GFLOP/s (%d threads)\n", step / ms / 1e6, 100 * step / ms / 1e6 / peak, peak, th
}'
# per round: the step against the peak probed just before and just after it
awk -v step="$step" -v shares="$out/shares.txt" '
    { s = 100 * step / $3 / 1e6 / (($1 + $2) / 2); print s >shares
      printf "round %d: probe %s / %s GFLOP/s before / after, step %s ms = %.1f%% of their mean\n", NR, $1, $2, $3, s }' \
    "$out/rounds.txt"
sort -g "$out/shares.txt" | awk '{ a[NR] = $1 } END {
    printf "median share of the peak probed around each run: %.1f%% (rounds %.1f-%.1f%%)\n", a[int((NR + 1) / 2)], a[1], a[NR] }'
echo "# step by step: bench/peak_steps, $steps steps"
"$out/peak_steps" "$D" --steps "$steps" --threads "$threads" || exit 1
