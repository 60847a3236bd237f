#!/usr/bin/env bash
# The C API at the CLI's speed (issue 29): a program of one's own that translates a file with one
# tfm_translator and one call per batch (examples/translate.c, linked statically with libtfm.a) against
# `tfm translate`, same model, same input, same threads (OMP_NUM_THREADS for the program), alternating
# rounds (the order flips every round). Prints sentences/s of each side per round, the medians, their ratio
# (> 1: the program is faster), and whether the outputs are identical.
#
#   bench/api.sh MODEL.tfm SOURCE.txt [--rounds R] [--threads N] [--build DIR]
#
# MODEL: e.g. the Multi30k recipe's model (recipes/multi30k-de-en.sh OUTDIR: OUTDIR/model.avg.tfm), decoded with
# its stored settings (beam 5, alpha 1) on both sides; SOURCE: e.g. test_2016_flickr.de.
set -euo pipefail
cd "$(dirname "$0")/.."
model=${1:?usage: bench/api.sh MODEL.tfm SOURCE.txt [--rounds R] [--threads N] [--build DIR]}
src=${2:?usage: bench/api.sh MODEL.tfm SOURCE.txt [--rounds R] [--threads N] [--build DIR]}
shift 2
rounds=5 threads=2 build=build
while [ $# -gt 0 ]; do
    case $1 in
        --rounds) rounds=$2; shift 2;;
        --threads) threads=$2; shift 2;;
        --build) build=$2; shift 2;;
        *) echo "bench/api.sh: unknown option '$1'" >&2; exit 2;;
    esac
done
make --no-print-directory -j2 BUILD="$build" "$build/tfm" "$build/libtfm.a" >/dev/null
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cc -O2 -std=c11 -Iinclude examples/translate.c "$build/libtfm.a" -fopenmp -lm -o "$tmp/translate"
bash bench/sysinfo.sh 2>/dev/null | grep "^# CPU" || true
n=$(wc -l <"$src")
echo "model $model, $n sentences from $src, $threads threads, $rounds rounds"
now() { date +%s.%N; }
run_cli() { "$build/tfm" translate "$model" --threads "$threads" <"$src" >"$tmp/cli.txt" 2>/dev/null; }
run_api() { OMP_NUM_THREADS=$threads "$tmp/translate" "$model" <"$src" >"$tmp/api.txt"; }
cli=() api=()
for r in $(seq "$rounds"); do
    for side in $( [ $((r % 2)) -eq 1 ] && echo "cli api" || echo "api cli"); do
        t0=$(now); "run_$side"; t1=$(now)
        rate=$(awk -v n="$n" -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", n / (b - a) }')
        if [ "$side" = cli ]; then cli+=("$rate"); else api+=("$rate"); fi
    done
    echo "round $r: tfm translate ${cli[-1]} sentences/s, one-object program ${api[-1]} sentences/s"
done
median() { printf '%s\n' "$@" | sort -g | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
mc=$(median "${cli[@]}") ma=$(median "${api[@]}")
echo "median: tfm translate $mc sentences/s, program $ma sentences/s, ratio program/CLI $(awk -v a="$ma" -v c="$mc" 'BEGIN { printf "%.3f", a / c }')"
cmp -s "$tmp/cli.txt" "$tmp/api.txt" && echo "outputs: identical ($n lines)" || echo "outputs: DIFFER"
