#!/usr/bin/env bash
# train-mt --resume needs no other flag (issue 32, item 4): the run's thread count is stored and restored unless
# --threads is given, --log-file is part of the run and a resume appends to it (also without --log-file), and a
# stored relative data path that cannot be read from here names the flag to give. Uses $TFM; run from the repo root.
source "$(dirname "$0")/lib.bash"
TFM=${TFM:-build/tfm}
TFM=$(cd "$(dirname "$TFM")" && pwd)/$(basename "$TFM")   # the test changes directories
TSV=$PWD/data/fra-eng-demo.tsv
head -n 400 "$TSV" | cut -f1 >"$TMP/src.txt"
head -n 400 "$TSV" | cut -f2 >"$TMP/tgt.txt"
R="--src $TMP/src.txt --tgt $TMP/tgt.txt --epochs 2 --batch-size 32 --log-every 5"

# the whole run on 1 thread, and the same run stopped after 7 steps and resumed without --threads
$TFM train-mt $R --threads 1 --out "$TMP/whole.tfm" --log-file "$TMP/part.jsonl" 2>/dev/null \
    || fail "train-mt whole run" "failed"   # the same --log-file: it is part of the run configuration
rm -f "$TMP/part.jsonl"
$TFM train-mt $R --threads 1 --out "$TMP/part.tfm" --log-file "$TMP/part.jsonl" --max-steps 7 2>/dev/null \
    || fail "train-mt --max-steps 7" "failed"
before=$(wc -l <"$TMP/part.jsonl")
expect_ok "train-mt --resume without --threads or --log-file" env OMP_NUM_THREADS=2 $TFM train-mt --resume "$TMP/part.tfm"
cmp -s "$TMP/whole.tfm" "$TMP/part.tfm" && pass "resume takes the run's thread count (the 1-thread run, bit-identical)" \
    || fail "resume takes the run's thread count" "checkpoints differ"
grep -q "^--threads 1: the run's thread count (this machine's default is 2;" "$TMP/err" \
    && pass "resume says it uses the run's thread count" || fail "resume says the thread count" "$(head -n 3 "$TMP/err")"
after=$(wc -l <"$TMP/part.jsonl")
[ "$before" -ge 2 ] && [ "$after" -gt "$before" ] && head -n 1 "$TMP/part.jsonl" | grep -q '"step": *5[,}]' \
    && pass "resume without --log-file appends to the run's log ($before -> $after lines, the first kept)" \
    || fail "resume appends to the run's log" "$before -> $after lines: $(head -n 1 "$TMP/part.jsonl")"

# --log-file given on --resume: appended to, not erased; --threads given: used (and stored)
$TFM train-mt $R --threads 1 --out "$TMP/p2.tfm" --log-file "$TMP/p2.jsonl" --max-steps 7 2>/dev/null
printf '{"old": 1}\n' >"$TMP/other.jsonl"
expect_ok "train-mt --resume --log-file OTHER --threads 2 --max-steps 10" \
    $TFM train-mt --resume "$TMP/p2.tfm" --log-file "$TMP/other.jsonl" --threads 2 --max-steps 10
head -n 1 "$TMP/other.jsonl" | grep -q '"old": 1' && [ "$(wc -l <"$TMP/other.jsonl")" -ge 2 ] \
    && pass "--log-file on --resume appends" || fail "--log-file on --resume appends" "$(head -n 2 "$TMP/other.jsonl")"
grep -q "train-mt config: .*--threads 2" "$TMP/err" && pass "a given --threads replaces the run's" \
    || fail "a given --threads replaces the run's" "$(grep config "$TMP/err")"

# a relative data path stored in the checkpoint (as given and resolved), resumed from another directory
mkdir -p "$TMP/run" "$TMP/else"
cp "$TMP/src.txt" "$TMP/tgt.txt" "$TMP/run/"
(cd "$TMP/run" && $TFM train-mt --src src.txt --tgt tgt.txt --epochs 2 --batch-size 32 --threads 1 --log-every 0 \
    --out r.tfm --max-steps 3 2>/dev/null) || fail "train-mt with relative paths" "failed"
cp "$TMP/run/r.tfm" "$TMP/run/r0.tfm"
(cd "$TMP/else" && expect_ok "resume from another directory finds the run's relative --src / --tgt" \
    $TFM train-mt --resume ../run/r.tfm --max-steps 5)
mv "$TMP/run/src.txt" "$TMP/run/moved.txt"
(cd "$TMP/else" && expect_exit "resume of a run whose --src moved names the flag to give" 2 \
    "--src src.txt \(the run's, stored in the checkpoint\) cannot be read from here; give --src PATH to name it" \
    $TFM train-mt --resume ../run/r0.tfm)
(cd "$TMP/else" && expect_ok "resume with --src naming the moved file" \
    $TFM train-mt --resume ../run/r0.tfm --src ../run/moved.txt)

# issue 35's regularisers (BPE-dropout re-segments every epoch, R-Drop, split dropouts): a run stopped inside its
# second epoch and resumed ends bit-identical to the whole run, and a resume refuses another --bpe-dropout / --rdrop
G="--src $TMP/src.txt --tgt $TMP/tgt.txt --tokenizer bpe --vocab-size 400 --d-model 16 --n-head 2 --n-layer 1 --ffn 32
   --max-tokens 256 --epochs 2 --warmup 10 --threads 2 --log-every 0 --bpe-dropout 0.2 --rdrop 1
   --attention-dropout 0.05 --activation-dropout 0.1"
$TFM train-mt $G --out "$TMP/rw.tfm" 2>/dev/null || fail "train-mt with the regularisers" "failed"
$TFM train-mt $G --out "$TMP/rp.tfm" --max-steps 25 2>/dev/null || fail "train-mt with the regularisers --max-steps" "failed"
expect_ok "resume of a run with --bpe-dropout --rdrop" $TFM train-mt --resume "$TMP/rp.tfm"
cmp -s "$TMP/rw.tfm" "$TMP/rp.tfm" && pass "regularisers: stopped and resumed = the whole run (bit-identical)" \
    || fail "regularisers: stopped and resumed = the whole run" "checkpoints differ"
expect_exit "resume refuses another --bpe-dropout" 2 "--bpe-dropout 0.3 differs from the checkpoint's --bpe-dropout 0.2" \
    $TFM train-mt --resume "$TMP/rw.tfm" --bpe-dropout 0.3 --epochs 3
expect_exit "resume refuses another --rdrop" 2 "--rdrop 2 differs from the checkpoint's --rdrop 1" \
    $TFM train-mt --resume "$TMP/rw.tfm" --rdrop 2 --epochs 3

# --ema-decay: the weights' moving average is part of the checkpoint (a run stopped and resumed ends bit-identical to
# the whole run, OUT.ema.tfm too), OUT.ema.tfm is a model translate loads, and a resume refuses another decay
E="--src $TMP/src.txt --tgt $TMP/tgt.txt --tokenizer bpe --vocab-size 400 --d-model 16 --n-head 2 --n-layer 1 --ffn 32
   --max-tokens 256 --epochs 2 --warmup 10 --threads 2 --log-every 0 --ema-decay 0.9"
$TFM train-mt $E --out "$TMP/ew.tfm" 2>/dev/null || fail "train-mt --ema-decay" "failed"
$TFM train-mt $E --out "$TMP/ep.tfm" --max-steps 25 2>/dev/null || fail "train-mt --ema-decay --max-steps" "failed"
expect_ok "resume of a run with --ema-decay" $TFM train-mt --resume "$TMP/ep.tfm"
cmp -s "$TMP/ew.tfm" "$TMP/ep.tfm" && cmp -s "$TMP/ew.ema.tfm" "$TMP/ep.ema.tfm" \
    && pass "--ema-decay: stopped and resumed = the whole run, the average too (bit-identical)" \
    || fail "--ema-decay: stopped and resumed = the whole run" "checkpoints or averages differ"
expect_ok "translate loads OUT.ema.tfm" sh -c "head -n 3 '$TMP/src.txt' | $TFM translate '$TMP/ew.ema.tfm'"
$TFM info "$TMP/ew.ema.tfm" | grep -q "ema .*decay 0.9, at step 36" && ! cmp -s "$TMP/ew.ema.tfm" "$TMP/ew.tfm" \
    && pass "OUT.ema.tfm says what it is (tfm info)" || fail "OUT.ema.tfm says what it is" "$($TFM info "$TMP/ew.ema.tfm" | head -n 5)"
expect_exit "resume refuses another --ema-decay" 2 "--ema-decay 0.95 differs from the checkpoint's --ema-decay 0.9" \
    $TFM train-mt --resume "$TMP/ew.tfm" --ema-decay 0.95 --epochs 3

# --allow-new-data: a resume on other data counts the steps taken plus the new data's (26 + 2 epochs x 4 batches of 32
# of 100 pairs = 34; the schedule's length and the ETA), not --epochs x the new epoch's length
head -n 100 "$TMP/src.txt" >"$TMP/src100.txt"; head -n 100 "$TMP/tgt.txt" >"$TMP/tgt100.txt"
cp "$TMP/whole.tfm" "$TMP/nd.tfm"
expect_ok "train-mt --resume --allow-new-data (fine-tuning on 100 pairs)" $TFM train-mt --resume "$TMP/nd.tfm" \
    --allow-new-data --src "$TMP/src100.txt" --tgt "$TMP/tgt100.txt" --epochs 4 --log-every 1
grep -q "allow-new-data: --src .*src100.txt" "$TMP/err" && grep -q "step 27/34 " "$TMP/err" \
    && grep -q "step 34/34 " "$TMP/err" && ! grep -q "step 35/" "$TMP/err" \
    && pass "--allow-new-data: the run's length is the steps taken plus the new data's" \
    || fail "--allow-new-data: the run's length" "$(grep -m 3 'step ' "$TMP/err")"
