#!/usr/bin/env bash
# Multi30k en->de: recipes/multi30k.sh with --from en --to de (its header lists the steps and options).
#
#   recipes/multi30k-en-de.sh OUTDIR [--data DIR] [--threads N] [--epochs N] [--smoke] [-- TRAIN-MT FLAGS]
exec "$(dirname "$0")/multi30k.sh" "${1:?usage: recipes/multi30k-en-de.sh OUTDIR [--data DIR] [--threads N] [--epochs N] [--smoke] [-- TRAIN-MT FLAGS]}" \
    --from en --to de "${@:2}"
