#!/usr/bin/env bash
# Threads on an idle and on a busy machine (issue 12, items 3 and 4). gpt: the GPT baby config
# (tinyshakespeare, 4 layers x 128, block 64, batch 12), N iterations of train-lm; mt: the Multi30k
# Transformer of docs/BENCHMARKS.md (d_model 256, 3+3 layers, 8 heads, FFN 512, batch 64), N steps of
# train-mt (throughput: target tokens/s of its progress line). With 1 thread and with 2 threads in both
# --parallel modes (ops: the threads split every op; batch: one chunk of the batch per thread), first on the
# idle machine, then while `yes > /dev/null` keeps a core busy. Rounds alternate the configurations; the
# table has the median ms/step (train-lm's own "done" line: the training steps, not start-up or the final
# evaluation; train-mt: 1000 x 64 pairs / its tokens/s is not comparable, so mt prints tok/s) and the ratio
# to 1 thread in the same state.
#   bench/busy.sh [gpt|mt] [--iters N] [--rounds R]      (defaults gpt, 100, 3; ~2 minutes for gpt)
set -u
cd "$(dirname "$0")/.."
iters=100 rounds=3 work=gpt
while [ $# -gt 0 ]; do
    case $1 in
        gpt|mt) work=$1 ;;
        --iters) iters=${2:?}; shift ;;
        --rounds) rounds=${2:?}; shift ;;
        -h|--help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "bench/busy.sh: unknown argument '$1' (--iters N, --rounds R)" >&2; exit 2 ;;
    esac
    shift
done
TFM=${TFM:-build/tfm}
D=../shared/data/tinyshakespeare/input.txt
[ -x "$TFM" ] && [ -f "$D" ] || { echo "bench/busy.sh: needs $TFM (make) and $D" >&2; exit 1; }
bash bench/sysinfo.sh
echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(git log -1 --format=%h 2>/dev/null); loadavg at start $(cut -d' ' -f1-3 /proc/loadavg)"
out=$(mktemp -d)
trap 'rm -rf "$out"; [ -n "${Y:-}" ] && kill "$Y" 2>/dev/null' EXIT
M=../shared/data/multi30k
step_ms() { # threads parallel -> ms/step (gpt) or target tokens/s (mt)
    if [ "$work" = mt ]; then
        "$TFM" train-mt --src $M/train.de --tgt $M/train.en --preprocess moses --min-freq 2 --max-len 40 --d-model 256 \
            --n-head 8 --n-layer 3 --ffn 512 --dropout 0.1 --label-smoothing 0.1 --schedule noam --lr 0.3 --warmup 100 \
            --batch-size 64 --bucket 8 --epochs 1 --max-steps "$iters" --log-every "$iters" --threads "$1" --parallel "$2" \
            --out "$out/m.tfm" --overwrite 2>&1 | sed -n "s/.* step $iters\/.* \([0-9]*\) tok\/s.*/\1/p"
        return
    fi
    "$TFM" train-lm --data "$D" --out "$out/b.tfm" --overwrite --iters "$iters" --eval-every 100000 --eval-iters 1 --n-layer 4 \
        --n-head 4 --n-embd 128 --block-size 64 --batch-size 12 --threads "$1" --parallel "$2" --log-every 0 2>&1 \
        | sed -n 's/^done: .*(\([0-9.]*\) ms\/step.*/\1/p'
}
median() { sort -n | awk '{a[NR]=$1} END{print (NR % 2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
CONFIGS="1:ops 2:ops 2:batch"
for state in idle busy; do
    Y=
    if [ "$state" = busy ]; then yes >/dev/null & Y=$!; sleep 1; fi
    for r in $(seq "$rounds"); do
        for c in $CONFIGS; do step_ms "${c%%:*}" "${c##*:}" >>"$out/$state.${c/:/_}"; done
    done
    [ -n "$Y" ] && kill "$Y" && wait "$Y" 2>/dev/null
    Y=
done
unit="ms/step"; [ "$work" = mt ] && unit="tok/s"
echo "# workload $work, $iters steps"
printf '%-6s %-22s %10s %10s %s\n' state config "$unit" "vs 1 thr" rounds
for state in idle busy; do
    one=$(median <"$out/$state.1_ops")
    for c in $CONFIGS; do
        m=$(median <"$out/$state.${c/:/_}")
        printf '%-6s %-22s %10s %9.2fx %s\n' "$state" "${c%%:*} thread(s), ${c##*:}" "$m" "$(awk -v a="$one" -v b="$m" -v w="$work" 'BEGIN{print (w == "mt") ? b/a : a/b}')" \
            "$(tr '\n' ' ' <"$out/$state.${c/:/_}")"
    done
done
