#!/usr/bin/env bash
# issue 10 tuning: the recipe's training for 5 epochs with one change; compare with run B's epoch-5 validation
# (the Noam schedule does not depend on the run length, so epoch 5 of a 5-epoch run is epoch 5 of the recipe)
# usage: run.sh NAME [overriding flags...]   (later flags win over the recipe's)
set -u
name=$1; shift
D=/work/shared/data/multi30k T=/work/exp10/proxy/tfm
mkdir -p $name
$T train-mt --src $D/train.de --tgt $D/train.en --valid-src $D/val.de --valid-tgt $D/val.en \
    --tokenizer bpe --vocab-size 8000 ${SHARE---share-embeddings} --init xavier \
    --d-model 256 --n-head 4 --n-layer 3 --ffn 1024 --dropout 0.1 --label-smoothing 0.1 --max-len 64 \
    --schedule noam --lr 0.5 --warmup 1000 --beta2 0.98 --grad-clip 1 --max-tokens 2048 --epochs 5 \
    --threads 1 --seed 1 --log-every 50 --log-file $name/train.jsonl --out $name/train.tfm "$@" > $name/log.txt 2>&1
echo "$name exit $?" >> $name/log.txt
