#!/usr/bin/env bash
# Speed of imported Hugging Face models (issue 31; a benchmark, not a test: make test never runs it). tfm generate
# on a GPT-2 small import and tfm translate on an opus-mt-de-en-shaped MarianMT import, against the PyTorch twins
# written from transformers' modeling code decoding with KV caches (scripts/bench_hf_torch.py), 2 threads each
# side; PyTorch is run in two thread set-ups (2 intra-op threads; OpenBLAS 2 threads + 1 intra-op thread) and both
# are printed (take the faster). Weights are random (speed does not depend on them), so the translations run to the
# length cap: --max-output 60 on both sides, every sentence decodes 60 tokens (61 with beam search's last step).
# Each side's output ids are compared, so the two did the same work.
#   bench/interop.sh BUILD_DIR OUTDIR [N_SENTENCES]
set -eu
build=${1:-build}; out=${2:-/tmp/interop_bench}; nsent=${3:-200}
cd "$(dirname "$0")/.."
TFM="$build/tfm"
D=../shared/data/multi30k
[ -d "$D" ] || D=/work/shared/data/multi30k
PY=/usr/bin/python3
mkdir -p "$out"
uptime
# ---- the two Hugging Face folders (random weights, tokenizers as in scripts/hf_check.py) and their imports
$PY - "$out" <<'PY'
import os, sys, tempfile
sys.path.insert(0, 'scripts')
import torch
import hf_check, hf_gpt2_twin as gpt2, hf_marian_twin as marian
out = sys.argv[1]
g = os.path.join(out, 'gpt2-small')
if not os.path.exists(os.path.join(g, 'model.safetensors')):
    gpt2.save(gpt2.make('small', seed=1), g)
    hf_check.write_gpt2_tokenizer(os.path.join('tests', 'fixtures', 'gpt2'), g)
m = os.path.join(out, 'opus-mt-de-en-shape')
if not os.path.exists(os.path.join(m, 'model.safetensors')):
    os.makedirs(m, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        V = hf_check.write_marian_tokenizer(m, tmp, 8000, marian.SHAPES['opus']['vocab_size'])
    marian.save(marian.make(marian.config_json('opus', V), seed=1), m)
PY
$TFM import "$out/gpt2-small" --out "$out/gpt2.tfm"
$TFM import "$out/opus-mt-de-en-shape" --out "$out/marian.tfm"
torch_run() {   # torch_run LABEL ARGS...: both thread set-ups
    echo "-- PyTorch $1, intra-op 2 threads"
    env OMP_NUM_THREADS=2 $PY scripts/bench_hf_torch.py "${@:2}" --threads 2
    echo "-- PyTorch $1, OpenBLAS 2 threads, intra-op 1"
    env OPENBLAS_NUM_THREADS=2 OMP_NUM_THREADS=1 $PY scripts/bench_hf_torch.py "${@:2}" --threads 1
}

# ---- GPT-2 small: 200 tokens after a 11-token prompt
P='The quick brown fox said: "Hello, world!"'
ids=$(printf '%s\n' "$P" | $TFM bpe encode --model "$out/gpt2-small/vocab.json" --ids)
echo "== GPT-2 small: tfm generate, 200 tokens, 2 threads"
$TFM generate "$out/gpt2.tfm" --prompt "$P" --tokens 200 --temperature 0 --threads 2 >"$out/tfm_gpt2.txt"
torch_run "GPT-2 small" gpt2 "$out/gpt2-small" --prompt-ids "$ids" --tokens 200 --out "$out/torch_gpt2.ids"
printf '%s' "$P" >"$out/torch_gpt2.txt"
$TFM bpe decode --model "$out/gpt2-small/vocab.json" --ids --whole <"$out/torch_gpt2.ids" >>"$out/torch_gpt2.txt"
printf '\n' >>"$out/torch_gpt2.txt"
cmp -s "$out/tfm_gpt2.txt" "$out/torch_gpt2.txt" && echo "GPT-2: same text on both sides" || echo "GPT-2: OUTPUTS DIFFER"

# ---- MarianMT at opus-mt-de-en's shapes: Multi30k test sentences, greedy and beam 4
head -n "$nsent" $D/test_2016_flickr.de >"$out/src.de"
$TFM bpe encode --model "$out/opus-mt-de-en-shape/source.spm" --vocab "$out/opus-mt-de-en-shape/vocab.json" --ids \
    <"$out/src.de" >"$out/src.ids"
for beam in 1 4; do
    echo "== MarianMT: tfm translate, $nsent sentences, beam $beam, --max-output 60, 2 threads"
    s=$(date +%s.%N)
    $TFM translate "$out/marian.tfm" --beam $beam --max-output 60 --threads 2 <"$out/src.de" >"$out/tfm_beam$beam.en"
    e=$(date +%s.%N)
    echo "tfm: $nsent sentences in $(echo "$e - $s" | bc) s"
    torch_run "MarianMT beam $beam" marian "$out/opus-mt-de-en-shape" --src-ids "$out/src.ids" --beam $beam \
        --max-len 60 --out "$out/torch_beam$beam.ids"
    $TFM bpe decode --model "$out/opus-mt-de-en-shape/target.spm" --vocab "$out/opus-mt-de-en-shape/vocab.json" --ids \
        <"$out/torch_beam$beam.ids" >"$out/torch_beam$beam.en"
    cmp -s "$out/tfm_beam$beam.en" "$out/torch_beam$beam.en" && echo "beam $beam: same translations on both sides" \
        || echo "beam $beam: TRANSLATIONS DIFFER"
done
uptime
