#!/usr/bin/env bash
# make demo-mt: the translation twin of `make demo`. Trains a small English->French Transformer on the 8,000
# short Tatoeba pairs shipped in data/fra-eng-demo.tsv (CC BY 2.0 FR, data/README.md), translates a dozen
# sentences with beam search (each marked "seen" if it is a training source, else "new"), and draws the
# encoder-decoder attention of one of them.
#
#   scripts/demo-mt.sh [--out DIR] [--threads N] [--smoke]
#
# DIR (default build/demo-mt) gets model.tfm, translations.txt and attention.svg. --threads defaults to 2 (the
# numbers depend on the thread count, so the same count gives the same translations anywhere). --smoke: the
# same steps with a tiny model for 1 epoch on 500 pairs (seconds; tests/cli/demo_translator.sh).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
out=$here/build/demo-mt threads=2 smoke=0
while [ $# -gt 0 ]; do
    case $1 in
        --out) out=${2:?--out needs a folder}; shift 2;;
        --threads) threads=${2:?--threads needs a number}; shift 2;;
        --smoke) smoke=1; shift;;
        *) echo "scripts/demo-mt.sh: unknown option '$1' (--out DIR, --threads N, --smoke)" >&2; exit 2;;
    esac
done
TFM=${TFM:-$here/build/tfm}
[ -x "$TFM" ] || make -C "$here" --no-print-directory build/tfm >/dev/null
mkdir -p "$out"
data=$here/data/fra-eng-demo.tsv
# d2l's word tokens (lowercased, punctuation split), every word kept; a 2+2-layer Transformer 64 wide
model=(--preset d2l --min-freq 1 --max-len 12 --d-model 64 --n-head 4 --n-layer 2 --ffn 256 --dropout 0.1
       --label-smoothing 0.1 --lr 0.002 --batch-size 64 --epochs 30)
if [ "$smoke" = 1 ]; then
    head -n 500 "$data" >"$out/smoke.tsv"; data=$out/smoke.tsv
    model=(--preset d2l --min-freq 1 --max-len 12 --d-model 16 --n-head 2 --n-layer 1 --ffn 32 --epochs 1)
fi
t0=$(date +%s)
echo "training an English->French translator on $(wc -l <"$data") Tatoeba pairs ($data)..." >&2
"$TFM" train-mt --tsv "$data" "${model[@]}" --seed 1 --threads "$threads" --log-every 0 \
    --decode-beam 4 --decode-alpha 1 --src-lang en --tgt-lang fr --out "$out/model.tfm" --overwrite   # a rerun replaces it
t1=$(date +%s)
sentences=("I'm home." "Go away." "I lost." "He's calm." "I'm hungry." "We won." "Tom is tired." "I like cats."
           "I am cold." "She is happy." "We are friends." "Where is Tom?")
printf '%s\n' "${sentences[@]}" >"$out/sources.txt"
"$TFM" translate "$out/model.tfm" --threads "$threads" <"$out/sources.txt" >"$out/hypotheses.txt"
: >"$out/translations.txt"
i=0
while IFS= read -r hyp; do
    src=${sentences[$i]}; i=$((i + 1))
    seen=$(awk -F'\t' -v s="$src" '$1 == s { print "seen"; exit }' "$data")
    printf '%-16s => %s   (%s)\n' "$src" "$hyp" "${seen:-new}" >>"$out/translations.txt"
done <"$out/hypotheses.txt"
echo
cat "$out/translations.txt"
"$TFM" attention "$out/model.tfm" --text "We are friends." --out "$out/attention.svg" >&2
echo
echo "trained in $((t1 - t0)) s ($threads threads); model $out/model.tfm, attention picture $out/attention.svg"
echo "(translate your own: echo \"I am here.\" | $TFM translate $out/model.tfm)"
