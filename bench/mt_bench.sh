#!/usr/bin/env bash
# Translation benchmark (not a test): Multi30k de->en, d_model 256, 3+3 layers, 8 heads, FFN 512,
# dropout 0.1, label smoothing 0.1, the same number of steps for tfm and its PyTorch twin, 2 threads each.
#   bench/mt_bench.sh BUILD_DIR OUTDIR [tfm|torch|all]
# Prints training tokens/s, BLEU (tfm bleu, sacreBLEU-compatible) on test_2016_flickr with beam 4,
# and decoding sentences/s (greedy and beam 4). Results are recorded in docs/BENCHMARKS.md.
set -eu
build=${1:-build}; out=${2:-/tmp/mt_bench}; which=${3:-all}
D=../shared/data/multi30k
[ -d "$D" ] || D=/work/shared/data/multi30k
TFM="$build/tfm"
mkdir -p "$out"
N=${N:-19200}        # pairs used (0 = all 29,000): 19200 / 64 = 300 steps an epoch
EPOCHS=${EPOCHS:-1}   # the same for both sides
COMMON="--preprocess moses --min-freq 2 --max-len 40 --d-model 256 --n-head 8 --n-layer 3 --ffn 512 --dropout 0.1
  --label-smoothing 0.1 --schedule noam --lr 0.3 --warmup 100 --batch-size 64 --bucket 8 --epochs $EPOCHS --num-examples $N
  --seed 1 --threads 2"
if [ "$which" != torch ]; then
  echo "== tfm train"; uptime
  $TFM train-mt --src $D/train.de --tgt $D/train.en --valid-src $D/val.de --valid-tgt $D/val.en $COMMON \
      --out "$out/tfm_m30k.tfm" --overwrite --dump-data "$out/m30k" --log-every 50 2>&1 | tee "$out/tfm_train.log"
  $TFM train-mt --src $D/test_2016_flickr.de --tgt $D/test_2016_flickr.en --preprocess moses \
      --out "$out/unused.tfm" --dump-data "$out/test" --dump-only
  for beam in 1 4; do
    echo "== tfm translate beam $beam"
    s=$(date +%s.%N)
    $TFM translate "$out/tfm_m30k.tfm" --beam $beam --alpha 0.6 --max-output 60 --threads 2 < $D/test_2016_flickr.de > "$out/tfm_beam$beam.en"
    e=$(date +%s.%N)
    echo "tfm beam $beam: $(wc -l < "$out/tfm_beam$beam.en") sentences in $(echo "$e - $s" | bc) s" | tee -a "$out/tfm_decode.log"
    $TFM bleu "$out/tfm_beam$beam.en" $D/test_2016_flickr.en | tee -a "$out/tfm_decode.log"
  done
fi
if [ "$which" != tfm ]; then
  echo "== torch train + translate"; uptime
  # PyTorch's fastest configuration here: OpenBLAS (its GEMMs) on 2 threads, 1 intra-op thread (see bench/run.sh)
  env OPENBLAS_NUM_THREADS=2 OMP_NUM_THREADS=1 /usr/bin/python3 scripts/bench_mt_torch.py --data "$out/m30k" \
      --test "$out/test.train.src" --threads 1 \
      --epochs $EPOCHS --out "$out" 2>&1 | tee "$out/torch.log"
  for beam in 1 4; do
    $TFM bleu "$out/torch_beam$beam.en" $D/test_2016_flickr.en | tee -a "$out/torch.log"
  done
fi
