#!/usr/bin/env bash
# Multi30k de->en: recipes/multi30k.sh with --from de --to en (its header lists the steps and options).
#
#   recipes/multi30k-de-en.sh OUTDIR [--data DIR] [--threads N] [--epochs N] [--smoke] [-- TRAIN-MT FLAGS]
exec "$(dirname "$0")/multi30k.sh" "${1:?usage: recipes/multi30k-de-en.sh OUTDIR [--data DIR] [--threads N] [--epochs N] [--smoke] [-- TRAIN-MT FLAGS]}" \
    --from de --to en "${@:2}"
