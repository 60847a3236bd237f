#!/usr/bin/env bash
# Bad input to train-mt / translate / attention: one clear line, non-zero exit (warnings: exit 0).
# Prints "PASS name" / "FAIL name: why". Uses $TFM (the built binary).
set -u
TFM=${TFM:-build/tfm}
source "$(dirname "$0")/lib.bash"   # $TMP (removed at exit), pass, fail, skip
d=$TMP
# expect_err NAME PATTERN CMD... : non-zero exit, exactly one stderr line matching PATTERN
expect_err() {
    local name=$1 pat=$2; shift 2
    "$@" >"$d/out" 2>"$d/err"; local rc=$?
    local n; n=$(wc -l < "$d/err")
    if [ $rc -eq 0 ]; then fail "$name" "exit 0"; 
    elif ! grep -q -- "$pat" "$d/err"; then fail "$name" "stderr lacks '$pat': $(head -c 300 "$d/err")";
    elif [ "$n" -ne 1 ]; then fail "$name" "$n stderr lines: $(head -c 300 "$d/err")";
    else pass "$name"; fi
}
TINY="--d-model 8 --n-head 2 --n-layer 1 --ffn 8 --epochs 1 --batch-size 4 --min-freq 1 --threads 1 --log-every 0"

printf 'a b\nc d\ne f\n' > "$d/s.txt"; printf 'x y\nz w\n' > "$d/t.txt"
expect_err "mt different line counts name both counts" "3 .*2\|2 .*3" \
    $TFM train-mt --src "$d/s.txt" --tgt "$d/t.txt" --out "$d/m.tfm" $TINY
grep -q "s.txt" "$d/err" && grep -q "t.txt" "$d/err" && pass "mt line-count error names both files" \
    || fail "mt line-count error names both files" "$(cat "$d/err")"

printf 'go .\tva !\nhi .\tsalut .\n\nrun !\tcours !\n' > "$d/e.tsv"
$TFM train-mt --tsv "$d/e.tsv" --out "$d/e.tfm" $TINY >"$d/out" 2>"$d/err"; rc=$?
if [ $rc -eq 0 ] && grep -q "warning: .*e.tsv: skipped 1 empty line" "$d/err"; then pass "mt empty lines skipped and counted"
else fail "mt empty lines skipped and counted" "rc $rc: $(head -c 300 "$d/err")"; fi

printf 'go .\tva !\nbad \xff\xfe\tx\n' > "$d/u.tsv"
expect_err "mt invalid UTF-8 names file and line" "u.tsv.*2\|u.tsv:2" \
    $TFM train-mt --tsv "$d/u.tsv" --out "$d/m.tfm" $TINY

printf 'go .\tva !\nno tab here\n' > "$d/n.tsv"
expect_err "mt TSV line without a tab names file and line" "n.tsv:2" \
    $TFM train-mt --tsv "$d/n.tsv" --out "$d/m.tfm" $TINY

expect_err "mt missing corpus file" "nope.tsv" $TFM train-mt --tsv "$d/nope.tsv" --out "$d/m.tfm" $TINY
expect_err "mt needs --tsv or --src/--tgt" "tsv" $TFM train-mt --out "$d/m.tfm"
expect_err "mt bad --arch" "arch" $TFM train-mt --tsv "$d/e.tsv" --out "$d/m.tfm" --arch lstm
expect_err "mt bad --schedule" "schedule" $TFM train-mt --tsv "$d/e.tsv" --out "$d/m.tfm" --schedule linear
expect_err "mt bad --loss-norm" "loss-norm" $TFM train-mt --tsv "$d/e.tsv" --out "$d/m.tfm" --loss-norm sum
expect_err "mt bad --preprocess" "preprocess" $TFM train-mt --tsv "$d/e.tsv" --out "$d/m.tfm" --preprocess bpe
expect_err "mt bad --lr" "lr" $TFM train-mt --tsv "$d/e.tsv" --out "$d/m.tfm" --lr -1
expect_err "mt non-numeric --epochs" "epochs" $TFM train-mt --tsv "$d/e.tsv" --out "$d/m.tfm" --epochs ten
expect_err "mt --n-head must divide --d-model" "n-head" $TFM train-mt --tsv "$d/e.tsv" --out "$d/m.tfm" --d-model 32 --n-head 5
expect_err "mt bad --dropout" "dropout" $TFM train-mt --tsv "$d/e.tsv" --out "$d/m.tfm" --dropout 1.5
expect_err "mt bad --attention-dropout" "attention-dropout" $TFM train-mt --tsv "$d/e.tsv" --out "$d/m.tfm" --attention-dropout -0.5
expect_err "mt bad --activation-dropout" "activation-dropout" $TFM train-mt --tsv "$d/e.tsv" --out "$d/m.tfm" --activation-dropout 1
expect_err "mt --activation-dropout is for the transformer" "activation-dropout.*transformer" \
    $TFM train-mt --tsv "$d/e.tsv" --out "$d/m.tfm" --arch rnn --activation-dropout 0.1
expect_err "mt --bpe-dropout needs --tokenizer bpe" "bpe-dropout.*tokenizer bpe" \
    $TFM train-mt --tsv "$d/e.tsv" --out "$d/m.tfm" --bpe-dropout 0.1
expect_err "mt bad --bpe-dropout" "bpe-dropout" $TFM train-mt --tsv "$d/e.tsv" --out "$d/m.tfm" --tokenizer bpe --bpe-dropout 2
expect_err "mt bad --rdrop" "rdrop" $TFM train-mt --tsv "$d/e.tsv" --out "$d/m.tfm" --rdrop -1
expect_err "mt bad --ema-decay" "ema-decay must be in" $TFM train-mt --tsv "$d/e.tsv" --out "$d/m.tfm" --ema-decay 1
expect_err "mt --resume without a checkpoint" "resume" $TFM train-mt --tsv "$d/e.tsv" --resume "$d/none.tfm"

# a language-model checkpoint (meta.kind "gpt") given to translate: a minimal valid container
printf 'TFMC\x01\x00\x00\x00\x01\x00\x00\x00\x09\x00\x00\x00meta.kind\x02\x00\x00\x00\x01\x00\x00\x00\x03\x00\x00\x00\x03\x00\x00\x00\x00\x00\x00\x00gpt' > "$d/lm.tfm"
expect_err "translate refuses an LM checkpoint" "language-model" sh -c "echo hi | $TFM translate $d/lm.tfm"
expect_err "translate missing checkpoint" "nope.tfm" sh -c "echo hi | $TFM translate $d/nope.tfm"
if [ -f "$d/e.tfm" ]; then
    expect_err "translate empty stdin" "no input" sh -c "$TFM translate $d/e.tfm < /dev/null"
    expect_err "translate invalid UTF-8 on stdin names the line" "stdin:2" sh -c "printf 'go .\nx\377\n' | $TFM translate $d/e.tfm"
    expect_err "translate bad --beam" "beam" sh -c "echo go | $TFM translate $d/e.tfm --beam 65"
    expect_err "translate bad --alpha" "alpha" sh -c "echo go | $TFM translate $d/e.tfm --alpha -2"
    expect_err "attention needs --text" "text" $TFM attention "$d/e.tfm" --out "$d/a.svg"
    expect_err "attention refuses an LM checkpoint" "language-model" $TFM attention "$d/lm.tfm" --text "go ." --out "$d/a.svg"
    # empty lines on stdin keep their place
    out=$(printf 'go .\n\nhi .\n' | $TFM translate "$d/e.tfm" | wc -l)
    [ "$out" = 3 ] && pass "translate keeps empty lines in place" || fail "translate keeps empty lines in place" "$out lines"
else
    fail "translate tests" "no model trained"
fi

# --max-steps: a bad value is an error; a good one stops after N steps and writes a usable checkpoint
expect_err "mt --max-steps negative" "max-steps must be >= 0" \
    $TFM train-mt --tsv "$d/e.tsv" --out "$d/ms.tfm" $TINY --max-steps -1
$TFM train-mt --tsv "$d/e.tsv" --out "$d/ms.tfm" --d-model 8 --n-head 2 --n-layer 1 --ffn 8 --epochs 5 --batch-size 1 \
    --min-freq 1 --threads 1 --log-every 1 --max-steps 2 >"$d/out" 2>"$d/err"; rc=$?
steps=$(grep -c '^epoch .* step ' "$d/err")
if [ $rc -eq 0 ] && grep -q "step 2/15 " "$d/err" && ! grep -q "step 3/" "$d/err" && [ -s "$d/ms.tfm" ] \
    && echo "go ." | $TFM translate "$d/ms.tfm" --threads 1 >/dev/null 2>&1; then
    pass "mt --max-steps 2 stops after 2 of 15 steps and writes a checkpoint that translates"
else fail "mt --max-steps 2" "rc $rc, $steps step lines: $(head -c 400 "$d/err")"; fi

# A fresh run (no --resume) never replaces an earlier run's checkpoint or log: an existing --out or a non-empty
# --log-file is refused before any work (exit 2, one line naming the path, --resume and --overwrite) and left
# byte for byte as it was; --overwrite starts a new run over them; --resume still continues the run.
sha() { sha256sum "$1" | cut -d' ' -f1; }
$TFM train-mt --tsv "$d/e.tsv" --out "$d/g.tfm" --log-file "$d/g.jsonl" $TINY --epochs 2 >/dev/null 2>&1
if [ -s "$d/g.tfm" ] && [ -s "$d/g.jsonl" ]; then
    ckpt=$(sha "$d/g.tfm") log=$(sha "$d/g.jsonl")
    expect_exit "mt refuses an existing --out without --resume" 2 \
        "^tfm train-mt: --out .*/g\.tfm exists \(a checkpoint of an earlier run\): continue it with --resume .*/g\.tfm, or pass --overwrite" \
        $TFM train-mt --tsv "$d/e.tsv" --out "$d/g.tfm" $TINY
    [ "$(sha "$d/g.tfm")" = "$ckpt" ] && pass "mt refused --out: the checkpoint is untouched (same sha256)" \
        || fail "mt refused --out: the checkpoint is untouched (same sha256)" "changed"
    expect_exit "mt refuses a non-empty --log-file without --resume" 2 \
        "^tfm train-mt: --log-file .*/g\.jsonl exists and is not empty .*--overwrite" \
        $TFM train-mt --tsv "$d/e.tsv" --out "$d/g2.tfm" --log-file "$d/g.jsonl" $TINY
    [ "$(sha "$d/g.jsonl")" = "$log" ] && [ ! -e "$d/g2.tfm" ] \
        && pass "mt refused --log-file: the log is untouched (same sha256), no --out written" \
        || fail "mt refused --log-file: the log is untouched (same sha256), no --out written" "changed or g2.tfm written"
    # the BPE learning of a bpe run comes after the refusal: one line, nothing learned
    expect_exit "mt refuses an existing --out before learning BPE" 2 "g\.tfm exists" \
        $TFM train-mt --tsv "$d/e.tsv" --out "$d/g.tfm" --tokenizer bpe --vocab-size 300 $TINY
    printf 'not a checkpoint\n' >"$d/notes.txt"
    expect_exit "mt refuses an existing non-checkpoint --out" 2 "notes\.txt exists \(not a tfm checkpoint\): pass --overwrite" \
        $TFM train-mt --tsv "$d/e.tsv" --out "$d/notes.txt" $TINY
    expect_exit "mt names another trainer's checkpoint as --out" 2 "lm\.tfm exists \(a language model \(train-lm\)\)" \
        $TFM train-mt --tsv "$d/e.tsv" --out "$d/lm.tfm" $TINY
    : >"$d/empty.jsonl"
    expect_ok "mt takes an empty --log-file (nothing to lose)" \
        $TFM train-mt --tsv "$d/e.tsv" --out "$d/g3.tfm" --log-file "$d/empty.jsonl" $TINY
    expect_ok "mt --resume continues the run into its --out" $TFM train-mt --resume "$d/g.tfm" --epochs 3
    lines=$(wc -l <"$d/g.jsonl")
    expect_ok "mt --overwrite starts a new run over --out and --log-file" \
        $TFM train-mt --tsv "$d/e.tsv" --out "$d/g.tfm" --log-file "$d/g.jsonl" $TINY --epochs 1 --overwrite
    steps=$(grep -o '"step": *[0-9]*' "$d/g.jsonl" | tail -n 1 | grep -o '[0-9]*$')
    [ "$(wc -l <"$d/g.jsonl")" -lt "$lines" ] && [ "$(sha "$d/g.tfm")" != "$ckpt" ] \
        && pass "mt --overwrite: a new checkpoint and a new log (not appended: $lines -> $(wc -l <"$d/g.jsonl") lines)" \
        || fail "mt --overwrite: a new checkpoint and a new log" "$lines -> $(wc -l <"$d/g.jsonl") lines, last step $steps"
    $TFM info "$d/g.tfm" >"$d/info" 2>&1
    grep -q "epochs" "$d/info" && ! grep -q "overwrite" "$d/info" \
        && pass "mt --overwrite is not stored in the run configuration" \
        || fail "mt --overwrite is not stored in the run configuration" "$(grep -i "overwrite" "$d/info")"
    expect_ok "mt --resume of an --overwrite run (given --overwrite: not compared)" \
        $TFM train-mt --resume "$d/g.tfm" --epochs 2 --overwrite
else
    fail "mt fresh-run guard tests" "the first run wrote no checkpoint or log"
fi
