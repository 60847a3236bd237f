#!/usr/bin/env bash
# CLI tests for `tfm bpe learn | encode | decode`: exact round trips on every Multi30k file, identical
# output to spm_encode / spm_decode for a model trained by spm_train (SKIP without sentencepiece), and
# every bad input as a one-line error with nothing half-written.
cd "$(dirname "$0")/../.."
TFM=${TFM:-$PWD/build/tfm}
source tests/cli/lib.bash
D=../shared/data/multi30k
files="train.de train.en val.de val.en test_2016_flickr.de test_2016_flickr.en"

# expect_error_stdin NAME PATTERN INPUT CMD...: like expect_error, with INPUT on stdin
expect_error_stdin() {
    local name=$1 pattern=$2 input=$3; shift 3
    "$@" <"$input" >"$TMP/out" 2>"$TMP/err"
    local rc=$? lines
    lines=$(wc -l <"$TMP/err")
    if [ "$rc" -eq 0 ]; then fail "$name" "exit 0 (expected an error)"
    elif [ "$rc" -ge 128 ]; then fail "$name" "crashed (exit $rc)"
    elif [ "$lines" -ne 1 ]; then fail "$name" "expected one line on stderr, got $lines: $(head -c 300 "$TMP/err")"
    elif ! grep -Eq -- "$pattern" "$TMP/err"; then fail "$name" "message '$(cat "$TMP/err")' does not match /$pattern/"
    elif [ -s "$TMP/out" ]; then fail "$name" "wrote to stdout"
    else pass "$name"; fi
}

if [ ! -f "$D/train.de" ]; then
    skip bpe_multi30k "$D not found"
    exit 0
fi

# ---------------------------------------------------------------- our model: learn, round trips
expect_ok bpe_learn "$TFM" bpe learn --vocab-size 8000 -o "$TMP/m.model" "$D/train.de" "$D/train.en"
"$TFM" bpe learn --vocab-size 8000 -o "$TMP/m2.model" "$D/train.de" "$D/train.en" 2>/dev/null
if cmp -s "$TMP/m.model" "$TMP/m2.model"; then pass bpe_learn_deterministic; else fail bpe_learn_deterministic "two runs differ"; fi
if ls "$TMP" | grep -q '\.tmp\.'; then fail bpe_learn_no_temp "temp file left"; else pass bpe_learn_no_temp; fi

bad=""; unk=""
for f in $files; do
    "$TFM" bpe encode --model "$TMP/m.model" <"$D/$f" >"$TMP/p.txt" || bad="$bad $f(encode)"
    "$TFM" bpe decode --model "$TMP/m.model" <"$TMP/p.txt" | cmp -s - "$D/$f" || bad="$bad $f(pieces)"
    "$TFM" bpe encode --ids --model "$TMP/m.model" <"$D/$f" >"$TMP/i.txt" || bad="$bad $f(encode --ids)"
    "$TFM" bpe decode --ids --model "$TMP/m.model" <"$TMP/i.txt" | cmp -s - "$D/$f" || bad="$bad $f(ids)"
    [ "$(wc -l <"$TMP/p.txt")" -eq "$(wc -l <"$D/$f")" ] || bad="$bad $f(line count)"
    # id 3 is <unk>
    if tr ' ' '\n' <"$TMP/i.txt" | grep -qx 3; then unk="$unk $f"; fi
done
if [ -z "$bad" ]; then pass bpe_roundtrip_multi30k; else fail bpe_roundtrip_multi30k "decode(encode(x)) != x:$bad"; fi
if [ -z "$unk" ]; then pass bpe_no_unk_multi30k; else fail bpe_no_unk_multi30k "<unk> in$unk"; fi

# whitespace, tabs, unseen characters, a literal U+2581: still exact
printf '  two  spaces  \n\ttab\there\n\n \nunseen: \xe2\x82\xac \xf0\x9f\x98\x80 \xe6\x97\xa5\xe6\x9c\xac\nliteral \xe2\x96\x81 marker\nx\r\n' >"$TMP/tricky.txt"
if "$TFM" bpe encode --model "$TMP/m.model" <"$TMP/tricky.txt" | "$TFM" bpe decode --model "$TMP/m.model" | cmp -s - "$TMP/tricky.txt"
then pass bpe_roundtrip_tricky; else fail bpe_roundtrip_tricky "decode(encode(x)) != x"; fi
if "$TFM" bpe encode --model "$TMP/m.model" <"$TMP/tricky.txt" | grep -q '<0xE2> <0x82> <0xAC>'
then pass bpe_byte_fallback_cli; else fail bpe_byte_fallback_cli "no byte pieces for an unseen character"; fi

# ---------------------------------------------------------------- SentencePiece compatibility
if ! command -v spm_train >/dev/null || ! command -v spm_encode >/dev/null; then
    skip bpe_spm_compat "spm_train/spm_encode not installed (Debian package sentencepiece)"
else
    spm_train --input="$D/train.de,$D/train.en" --model_prefix="$TMP/spm" --vocab_size=8000 --model_type=bpe \
        --normalization_rule_name=identity --byte_fallback=true --num_threads=2 --minloglevel=2 >/dev/null 2>&1
    bad=""
    for f in val.de val.en test_2016_flickr.de test_2016_flickr.en; do
        "$TFM" bpe encode --model "$TMP/spm.model" <"$D/$f" >"$TMP/a.txt" 2>"$TMP/err" || bad="$bad $f(error: $(cat "$TMP/err"))"
        spm_encode --model "$TMP/spm.model" --output_format=piece <"$D/$f" >"$TMP/b.txt"
        cmp -s "$TMP/a.txt" "$TMP/b.txt" || bad="$bad $f(pieces)"
        "$TFM" bpe encode --ids --model "$TMP/spm.model" <"$D/$f" | cmp -s - <(spm_encode --model "$TMP/spm.model" --output_format=id <"$D/$f") \
            || bad="$bad $f(ids)"
        "$TFM" bpe decode --model "$TMP/spm.model" <"$TMP/b.txt" | cmp -s - <(spm_decode --model "$TMP/spm.model" <"$TMP/b.txt") \
            || bad="$bad $f(decode)"
    done
    [ -s "$TMP/b.txt" ] || bad="$bad (spm_train produced nothing)"
    if [ -z "$bad" ]; then pass bpe_spm_encode_identical; else fail bpe_spm_encode_identical "differs from spm_encode:$bad"; fi

    # spm_encode reads our model and agrees (on text without a literal U+2581)
    bad=""
    for f in val.de test_2016_flickr.en; do
        "$TFM" bpe encode --model "$TMP/m.model" <"$D/$f" | cmp -s - <(spm_encode --model "$TMP/m.model" --output_format=piece <"$D/$f") \
            || bad="$bad $f"
    done
    if [ -z "$bad" ]; then pass bpe_spm_reads_ours; else fail bpe_spm_reads_ours "spm_encode differs on our model:$bad"; fi

    # other normalizer settings and user-defined symbols, on lines full of spaces and unknown characters
    head -n 2000 "$D/train.en" >"$TMP/small.txt"
    cat "$TMP/tricky.txt" "$D/val.en" | head -n 300 >"$TMP/mixed.txt"
    printf 'a  dog <sep> runs\n   \n<sep><sep>\n' >>"$TMP/mixed.txt"
    bad=""
    for opt in "--remove_extra_whitespaces=false" "--add_dummy_prefix=false" "--byte_fallback=false" \
               "--user_defined_symbols=<sep>,dog"; do
        rm -f "$TMP/v.model"
        spm_train --input="$TMP/small.txt" --model_prefix="$TMP/v" --vocab_size=600 --model_type=bpe \
            --normalization_rule_name=identity --byte_fallback=true $opt --num_threads=2 --minloglevel=2 >/dev/null 2>&1
        [ -s "$TMP/v.model" ] || bad="$bad $opt(spm_train failed)"
        "$TFM" bpe encode --model "$TMP/v.model" <"$TMP/mixed.txt" | cmp -s - <(spm_encode --model "$TMP/v.model" <"$TMP/mixed.txt") \
            || bad="$bad $opt"
    done
    if [ -z "$bad" ]; then pass bpe_spm_options_identical; else fail bpe_spm_options_identical "differs from spm_encode with$bad"; fi

    # nmt_nfkc (SentencePiece's default normalization) and unigram models are read too (tests/cli/unigram.sh
    # checks unigram models in depth)
    spm_train --input="$TMP/small.txt" --model_prefix="$TMP/nfkc" --vocab_size=600 --model_type=bpe \
        --num_threads=2 --minloglevel=2 >/dev/null 2>&1
    spm_train --input="$TMP/small.txt" --model_prefix="$TMP/uni" --vocab_size=600 --model_type=unigram \
        --normalization_rule_name=identity --num_threads=2 --minloglevel=2 >/dev/null 2>&1
    bad=""
    for mdl in nfkc uni; do
        "$TFM" bpe encode --model "$TMP/$mdl.model" <"$TMP/mixed.txt" 2>"$TMP/err" |
            cmp -s - <(spm_encode --model "$TMP/$mdl.model" <"$TMP/mixed.txt") || bad="$bad $mdl($(head -c 200 "$TMP/err"))"
    done
    if [ -z "$bad" ]; then pass bpe_spm_nfkc_and_unigram_identical; else fail bpe_spm_nfkc_and_unigram_identical "differs from spm_encode:$bad"; fi
fi

# ---------------------------------------------------------------- bad input
head -c 5000 "$TMP/m.model" >"$TMP/trunc.model"
expect_error bpe_truncated_model "trunc.model: not a valid SentencePiece model" "$TFM" bpe encode --model "$TMP/trunc.model"
expect_error bpe_foreign_model "val.de" "$TFM" bpe encode --model "$D/val.de"
printf '' >"$TMP/empty.model"
expect_error bpe_empty_model "empty.model: empty file" "$TFM" bpe decode --model "$TMP/empty.model"
expect_error bpe_missing_model "cannot open '.*nope.model'" "$TFM" bpe encode --model "$TMP/nope.model"
expect_error bpe_no_model "--model FILE is required" "$TFM" bpe encode
head -n 500 "$D/train.en" >"$TMP/500.txt"
expect_error bpe_vocab_small "--vocab-size: vocabulary size 300 is smaller than the 260 special and byte pieces \+ [0-9]+ characters" \
    "$TFM" bpe learn --vocab-size 300 -o "$TMP/x.model" "$TMP/500.txt"
expect_error bpe_vocab_absurd "--vocab-size 2000000 is out of range" \
    "$TFM" bpe learn --vocab-size 2000000 -o "$TMP/x.model" "$TMP/500.txt"
expect_error bpe_vocab_too_large_for_text "--vocab-size: vocabulary size 100000 is too large for this text: it yields at most [0-9]+ pieces" \
    "$TFM" bpe learn --vocab-size 100000 -o "$TMP/x.model" "$TMP/500.txt"
expect_error bpe_coverage_range "--character-coverage: character coverage 2 must be in \[0.5, 1\]" \
    "$TFM" bpe learn --vocab-size 1000 --character-coverage 2 -o "$TMP/x.model" "$TMP/500.txt"
expect_error bpe_vocab_missing "--vocab-size N is required" "$TFM" bpe learn -o "$TMP/x.model" "$TMP/500.txt"
expect_error bpe_output_missing "-o FILE.model is required" "$TFM" bpe learn --vocab-size 1000 "$TMP/500.txt"
expect_error bpe_missing_text "cannot open '.*nope.txt'" "$TFM" bpe learn --vocab-size 1000 -o "$TMP/x.model" "$TMP/nope.txt"
expect_error bpe_output_dir "cannot write .*no/such/dir/x.model" "$TFM" bpe learn --vocab-size 1000 -o "$TMP/no/such/dir/x.model" "$TMP/500.txt"
printf 'fine\nalso fine\nbad \xc3\x28 here\n' >"$TMP/bad.txt"
expect_error bpe_learn_invalid_utf8 "bad.txt:3: invalid UTF-8" "$TFM" bpe learn --vocab-size 1000 -o "$TMP/x.model" "$TMP/500.txt" "$TMP/bad.txt"
if [ -e "$TMP/x.model" ]; then fail bpe_nothing_written "a failed learn wrote $TMP/x.model"; else pass bpe_nothing_written; fi
# a failed learn leaves an existing model untouched
cp "$TMP/m.model" "$TMP/keep.model"
"$TFM" bpe learn --vocab-size 100000 -o "$TMP/keep.model" "$TMP/500.txt" 2>/dev/null
if cmp -s "$TMP/m.model" "$TMP/keep.model" && ! ls "$TMP" | grep -q '\.tmp\.'; then pass bpe_failed_learn_keeps_old
else fail bpe_failed_learn_keeps_old "existing model changed or temp file left"; fi
expect_error_stdin bpe_encode_invalid_utf8 "stdin:3: invalid UTF-8" "$TMP/bad.txt" "$TFM" bpe encode --model "$TMP/m.model"
printf '4 5 6\n1 abc\n' >"$TMP/ids.txt"
expect_error_stdin bpe_decode_not_an_id "stdin:2: 'abc' is not an id" "$TMP/ids.txt" "$TFM" bpe decode --ids --model "$TMP/m.model"
printf '4 99999\n' >"$TMP/ids2.txt"
expect_error_stdin bpe_decode_id_range "stdin:1: id 99999 is out of range \(the model has 8000 pieces\)" "$TMP/ids2.txt" \
    "$TFM" bpe decode --ids --model "$TMP/m.model"
expect_error bpe_unknown_subcommand "unknown subcommand 'frobnicate'" "$TFM" bpe frobnicate
if "$TFM" bpe learn --help | grep -q "usage: tfm bpe learn"; then pass bpe_help; else fail bpe_help "no usage"; fi
