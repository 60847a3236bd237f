#!/usr/bin/env bash
# Record the reference GPT-2 tokenizer's output for tests/cli/gpt2_bpe.sh: npm gpt-3-encoder@1.1.4 (OpenAI's
# encoder in JavaScript) run under node on the hand cases (ids, committed) and on whole real files (sha256 of
# the ids: tinyshakespeare as one text, each Multi30k file line by line).
#   npm install --ignore-scripts --prefix .npm-deps gpt-3-encoder@1.1.4
#   bash scripts/make_gpt2_fixtures.sh
set -euo pipefail
cd "$(dirname "$0")/.."
G=tests/fixtures/gpt2
M=$PWD/${TFM_NPM_DEPS:-.npm-deps}/node_modules/gpt-3-encoder
ref() { node tests/node/gpt2_ref.js "$M" "$@"; }
ref encode-lines <"$G/hand_cases.txt" >"$G/hand_cases.ids"
{
    echo "tinyshakespeare/input.txt whole $(ref encode-whole <../shared/data/tinyshakespeare/input.txt | sha256sum | cut -c1-64)"
    for f in train.de train.en val.de val.en test_2016_flickr.de test_2016_flickr.en; do
        echo "multi30k/$f lines $(ref encode-lines <"../shared/data/multi30k/$f" | sha256sum | cut -c1-64)"
    done
} >"$G/expected.sha256"
echo "wrote $G/hand_cases.ids and $G/expected.sha256"
