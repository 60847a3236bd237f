# tfm train-lm / generate / info: a tiny end-to-end run, determinism, exact resume, bad input.
source "$(dirname "$0")/lib.bash"
TINY="--n-layer 1 --n-head 2 --n-embd 16 --block-size 16 --batch-size 4 --eval-iters 2 --threads 2"
head -c 20000 data/demo.txt >"$TMP/small.txt"

expect_ok "train-lm tiny run" $TFM train-lm --data "$TMP/small.txt" --out "$TMP/a.tfm" $TINY --iters 30 --eval-every 15 --warmup 5 --lr 3e-3
grep -q "val loss" "$TMP/err" && pass "train-lm reports validation loss" || fail "train-lm reports validation loss" "no 'val loss' in log"
first=$(grep -m1 -o 'loss [0-9.]*' "$TMP/err" | head -1 | cut -d' ' -f2)
last=$(grep -o 'train loss [0-9.]*' "$TMP/err" | tail -1 | cut -d' ' -f3)
awk -v a="$first" -v b="$last" 'BEGIN{exit !(b < a)}' && pass "train-lm loss falls ($first -> $last)" || fail "train-lm loss falls" "$first -> $last"

expect_ok "info on LM checkpoint" $TFM info "$TMP/a.tfm"
grep -q "n_layer *1" "$TMP/out" && grep -q "parameters:" "$TMP/out" && grep -q "iter *30" "$TMP/out" \
    && pass "info prints config, parameter count, training state" || fail "info content" "$(cat "$TMP/out")"

expect_ok "generate" $TFM generate "$TMP/a.tfm" --prompt "ROMEO:" --tokens 40 --seed 3 --top-k 5 --temperature 0.8
n=$(head -c 1000 "$TMP/out" | wc -c)
[ "$n" -ge 46 ] && head -c 6 "$TMP/out" | grep -q "ROMEO:" && pass "generate streams prompt + 40 characters" || fail "generate output" "$(cat "$TMP/out")"
cp "$TMP/out" "$TMP/gen1"
$TFM generate "$TMP/a.tfm" --prompt "ROMEO:" --tokens 40 --seed 3 --top-k 5 --temperature 0.8 >"$TMP/gen2" 2>/dev/null
cmp -s "$TMP/gen1" "$TMP/gen2" && pass "generate is deterministic for a seed" || fail "generate determinism" "outputs differ"

# --top-p: a nucleus this small keeps only the most likely token, so sampling is greedy decoding.
$TFM generate "$TMP/a.tfm" --prompt "ROMEO:" --tokens 40 --seed 3 --top-p 1e-6 >"$TMP/gp" 2>/dev/null
$TFM generate "$TMP/a.tfm" --prompt "ROMEO:" --tokens 40 --temperature 0 >"$TMP/gg" 2>/dev/null
cmp -s "$TMP/gp" "$TMP/gg" && pass "generate --top-p 1e-6 == greedy" || fail "generate --top-p 1e-6 == greedy" "outputs differ"
$TFM generate "$TMP/a.tfm" --prompt "ROMEO:" --tokens 40 --seed 3 --top-p 0.9 >"$TMP/gp9" 2>/dev/null
cmp -s "$TMP/gp9" "$TMP/gen1" && fail "generate --top-p 0.9 samples" "same as top-k 5" || pass "generate --top-p 0.9 samples"
expect_error "generate: --top-p 0" "--top-p must be in" $TFM generate "$TMP/a.tfm" --top-p 0

# Same seed and threads: bit-identical checkpoints (with dropout on, so the dropout RNG is covered).
$TFM train-lm --data "$TMP/small.txt" --out "$TMP/d1.tfm" $TINY --iters 20 --eval-every 10 --dropout 0.1 2>/dev/null
$TFM train-lm --data "$TMP/small.txt" --out "$TMP/d2.tfm" $TINY --iters 20 --eval-every 10 --dropout 0.1 2>/dev/null
cmp -s "$TMP/d1.tfm" "$TMP/d2.tfm" && pass "train-lm deterministic (same seed, same threads)" || fail "train-lm determinism" "checkpoints differ"

# Resume: 10 steps, stop, resume to 20 == 20 straight.
$TFM train-lm --data "$TMP/small.txt" --out "$TMP/r.tfm" $TINY --iters 20 --eval-every 10 --dropout 0.1 --max-steps 7 2>/dev/null
expect_ok "train-lm --resume" $TFM train-lm --data "$TMP/small.txt" --out "$TMP/r.tfm" --resume "$TMP/r.tfm" --threads 2
cmp -s "$TMP/d1.tfm" "$TMP/r.tfm" && pass "resume continues the run exactly (bit-identical checkpoint)" || fail "resume exactness" "checkpoints differ"

# Gradient accumulation: 2 micro-batches of 2 draw the same 4 windows as one batch of 4 and average
# the same losses, so the runs agree up to float summation order. (Evaluation uses the micro-batch
# size, so the second run evaluates 4 batches of 2: the same 8 windows as 2 batches of 4.)
SMALL="--n-layer 1 --n-head 2 --n-embd 16 --block-size 16 --threads 2 --iters 20 --eval-every 20"
$TFM train-lm --data "$TMP/small.txt" --out "$TMP/acc1.tfm" $SMALL --batch-size 4 --eval-iters 2 2>/dev/null
$TFM train-lm --data "$TMP/small.txt" --out "$TMP/acc2.tfm" $SMALL --batch-size 2 --grad-accum 2 --eval-iters 4 2>/dev/null
v1=$($TFM info "$TMP/acc1.tfm" | awk '$1 == "val_loss" {print $2}')
v2=$($TFM info "$TMP/acc2.tfm" | awk '$1 == "val_loss" {print $2}')
awk -v a="$v1" -v b="$v2" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a != "" && d < 1e-4) }' \
    && pass "grad-accum 2 x batch 2 == batch 4 (val loss $v1 vs $v2)" || fail "grad-accum equivalence" "val loss '$v1' vs '$v2'"

# ---------------------------------------------------------------- bad input
printf '' >"$TMP/empty.txt"
printf 'ab\0cd' >"$TMP/binary.txt"
printf 'short text' >"$TMP/short.txt"
printf 'ok \xff\xfe bad\n' >"$TMP/badutf8.txt"
expect_error "missing data file" "nope.txt" $TFM train-lm --data "$TMP/nope.txt" --out "$TMP/x.tfm"
expect_error "empty data file" "empty" $TFM train-lm --data "$TMP/empty.txt" --out "$TMP/x.tfm"
expect_error "binary data file" "binary" $TFM train-lm --data "$TMP/binary.txt" --out "$TMP/x.tfm"
expect_error "invalid UTF-8 data file" "UTF-8" $TFM train-lm --data "$TMP/badutf8.txt" --out "$TMP/x.tfm"
expect_error "corpus shorter than block size" "too short" $TFM train-lm --data "$TMP/short.txt" --out "$TMP/x.tfm" --block-size 64
expect_error "unknown flag" "unknown flag --bogus" $TFM train-lm --data "$TMP/small.txt" --out "$TMP/x.tfm" --bogus 1
expect_error "negative lr" "--lr must be > 0" $TFM train-lm --data "$TMP/small.txt" --out "$TMP/x.tfm" --lr -1
expect_error "non-numeric value" "--iters: 'ten' is not an integer" $TFM train-lm --data "$TMP/small.txt" --out "$TMP/x.tfm" --iters ten
expect_error "n_embd not divisible by n_head" "divisible" $TFM train-lm --data "$TMP/small.txt" --out "$TMP/x.tfm" --n-embd 30 --n-head 4
expect_error "zero batch" "--batch-size must be (>= 1|in 1)" $TFM train-lm --data "$TMP/small.txt" --out "$TMP/x.tfm" --batch-size 0
expect_error "missing --out" "--out" $TFM train-lm --data "$TMP/small.txt"
expect_error "flag without value" "needs a value" $TFM train-lm --data "$TMP/small.txt" --out
[ ! -e "$TMP/x.tfm" ] && pass "failed runs write no checkpoint" || fail "failed runs write no checkpoint" "x.tfm exists"

# unwritable output: error, and no temp file left behind
expect_error "unwritable --out" "x.tfm" $TFM train-lm --data "$TMP/small.txt" --out "$TMP/no/such/dir/x.tfm" $TINY --iters 2 --eval-every 2
ls "$TMP"/no 2>/dev/null | grep -q . && fail "no temp file after failed save" "found files" || pass "no temp file after failed save"

size=$(stat -c %s "$TMP/a.tfm")
head -c $((size / 2)) "$TMP/a.tfm" >"$TMP/trunc.tfm"
expect_error "truncated checkpoint" "trunc.tfm" $TFM generate "$TMP/trunc.tfm" --tokens 5
expect_error "foreign file as checkpoint" "small.txt.*(magic|not a tfm)" $TFM info "$TMP/small.txt"
cp "$TMP/a.tfm" "$TMP/corrupt.tfm"
printf '\xff\xff\xff\x7f' | dd of="$TMP/corrupt.tfm" bs=1 seek=12 conv=notrunc 2>/dev/null  # first entry's name length
expect_error "corrupted checkpoint (bad size field)" "corrupt.tfm" $TFM generate "$TMP/corrupt.tfm" --tokens 5
expect_error "truncated checkpoint on --resume" "trunc.tfm" $TFM train-lm --data "$TMP/small.txt" --out "$TMP/x.tfm" --resume "$TMP/trunc.tfm"
expect_error "prompt character outside the vocabulary" "not in the vocabulary" $TFM generate "$TMP/a.tfm" --prompt "€" --tokens 5
expect_error "generate: negative temperature" "temperature" $TFM generate "$TMP/a.tfm" --temperature -1
expect_error "generate: missing model argument" "missing argument" $TFM generate
expect_error "unknown command" "unknown command" $TFM frobnicate
expect_ok "tfm --help" $TFM --help
for c in train-lm generate info; do
    $TFM $c --help >"$TMP/h" 2>&1 && grep -q "usage: tfm $c" "$TMP/h" && pass "$c --help" || fail "$c --help" "$(head -3 "$TMP/h")"
done

# A resume takes the run's thread count (the numbers depend on it), appends to the run's --log-file, and names
# the flag to give when the stored relative --data path cannot be read from here (issue 32, item 4).
T1="--n-layer 1 --n-head 2 --n-embd 16 --block-size 16 --batch-size 4 --eval-iters 2 --iters 20 --eval-every 10"
$TFM train-lm --data "$TMP/small.txt" --out "$TMP/t1.tfm" $T1 --threads 1 --log-file "$TMP/t1r.jsonl" --log-every 1 \
    2>/dev/null   # the same --log-file: it is part of the run configuration in the checkpoint
rm -f "$TMP/t1r.jsonl"
$TFM train-lm --data "$TMP/small.txt" --out "$TMP/t1r.tfm" $T1 --threads 1 --max-steps 7 --log-file "$TMP/t1r.jsonl" \
    --log-every 1 2>/dev/null
before=$(wc -l <"$TMP/t1r.jsonl")
expect_ok "train-lm --resume without --threads" $TFM train-lm --resume "$TMP/t1r.tfm" --data "$TMP/small.txt"
cmp -s "$TMP/t1.tfm" "$TMP/t1r.tfm" && pass "resume uses the run's thread count (1-thread run resumed: bit-identical)" \
    || fail "resume uses the run's thread count" "checkpoints differ"
after=$(wc -l <"$TMP/t1r.jsonl")
[ "$before" -ge 7 ] && [ "$after" -gt "$before" ] && head -n 1 "$TMP/t1r.jsonl" | grep -q '"step": *1[,}]' \
    && pass "resume appends to the run's --log-file ($before -> $after lines, the first kept)" \
    || fail "resume appends to the run's --log-file" "$before -> $after lines: $(head -n 1 "$TMP/t1r.jsonl")"
mkdir -p "$TMP/run" "$TMP/else"
cp "$TMP/small.txt" "$TMP/run/small.txt"
(cd "$TMP/run" && $TFM train-lm --data small.txt --out r.tfm $T1 --threads 1 --max-steps 5 2>/dev/null)
cp "$TMP/run/r.tfm" "$TMP/run/r0.tfm"
(cd "$TMP/else" && $TFM train-lm --resume ../run/r.tfm --max-steps 6 >"$TMP/out" 2>"$TMP/err") \
    && pass "resume from another directory finds the run's relative --data (its resolved path is stored)" \
    || fail "resume from another directory" "$(tail -n 2 "$TMP/err")"
mv "$TMP/run/small.txt" "$TMP/run/moved.txt"
(cd "$TMP/else" && $TFM train-lm --resume ../run/r0.tfm >"$TMP/out" 2>"$TMP/err"); rc=$?
[ "$rc" -ne 0 ] && grep -q -- "--data small.txt (the run's, stored in the checkpoint) cannot be read from here; give --data PATH" "$TMP/err" \
    && pass "resume of a run whose --data moved names --data to give" || fail "resume: moved --data hint" "rc $rc: $(cat "$TMP/err")"
(cd "$TMP/else" && $TFM train-lm --resume ../run/r0.tfm --data ../run/moved.txt 2>/dev/null) \
    && pass "resume with --data naming the moved file" || fail "resume with --data of the moved file" "failed"

# A new run (no --resume) never replaces an earlier run's files: the checkpoint of an unfinished run as --out,
# or its non-empty --log-file, is refused before any work (exit 2, one line naming the path, --resume and
# --overwrite) and left byte for byte as it was; --overwrite starts a new run over them; --resume continues.
sha() { sha256sum "$1" | cut -d' ' -f1; }
$TFM train-lm --data "$TMP/small.txt" --out "$TMP/u.tfm" $T1 --threads 1 --max-steps 5 --log-file "$TMP/u.jsonl" \
    --log-every 1 2>/dev/null
ckpt=$(sha "$TMP/u.tfm") log=$(sha "$TMP/u.jsonl") lines=$(wc -l <"$TMP/u.jsonl")
expect_exit "train-lm refuses an existing --out without --resume" 2 \
    "^tfm train-lm: --out .*/u\.tfm exists \(a checkpoint of an earlier run\): continue it with --resume .*/u\.tfm, or pass --overwrite to start a new run over it$" \
    $TFM train-lm --data "$TMP/small.txt" --out "$TMP/u.tfm" $T1 --threads 1 --log-file "$TMP/u.jsonl"
expect_exit "train-lm refuses a non-empty --log-file without --resume" 2 \
    "^tfm train-lm: --log-file .*/u\.jsonl exists and is not empty \(the log of an earlier run\): pass --overwrite" \
    $TFM train-lm --data "$TMP/small.txt" --out "$TMP/u2.tfm" $T1 --threads 1 --log-file "$TMP/u.jsonl"
expect_exit "train-lm refuses an existing --out before learning BPE" 2 "u\.tfm exists" \
    $TFM train-lm --data "$TMP/small.txt" --out "$TMP/u.tfm" $T1 --tokenizer bpe --vocab-size 300
[ "$(sha "$TMP/u.tfm")" = "$ckpt" ] && [ "$(sha "$TMP/u.jsonl")" = "$log" ] && [ ! -e "$TMP/u2.tfm" ] \
    && pass "train-lm refusals: checkpoint and log untouched (same sha256), nothing written" \
    || fail "train-lm refusals: checkpoint and log untouched (same sha256), nothing written" "changed, or u2.tfm written"
: >"$TMP/empty.jsonl"
expect_ok "train-lm takes an empty --log-file (nothing to lose)" \
    $TFM train-lm --data "$TMP/small.txt" --out "$TMP/u3.tfm" $T1 --threads 1 --max-steps 2 --log-file "$TMP/empty.jsonl"
expect_ok "train-lm --resume continues the unfinished run" $TFM train-lm --resume "$TMP/u.tfm" --max-steps 8
[ "$(wc -l <"$TMP/u.jsonl")" -gt "$lines" ] && pass "train-lm --resume appends to the run's log ($lines -> $(wc -l <"$TMP/u.jsonl") lines)" \
    || fail "train-lm --resume appends to the run's log" "$lines -> $(wc -l <"$TMP/u.jsonl") lines"
resumed=$(sha "$TMP/u.tfm") lines=$(wc -l <"$TMP/u.jsonl")
expect_ok "train-lm --overwrite starts a new run over --out and --log-file" \
    $TFM train-lm --data "$TMP/small.txt" --out "$TMP/u.tfm" $T1 --threads 1 --max-steps 2 --log-file "$TMP/u.jsonl" \
    --log-every 1 --overwrite
[ "$(sha "$TMP/u.tfm")" != "$resumed" ] && [ "$(wc -l <"$TMP/u.jsonl")" -lt "$lines" ] \
    && head -n 1 "$TMP/u.jsonl" | grep -q '"step": *1[,}]' \
    && pass "train-lm --overwrite: a new checkpoint and a new log from step 1 ($lines -> $(wc -l <"$TMP/u.jsonl") lines)" \
    || fail "train-lm --overwrite: a new checkpoint and a new log" "$lines -> $(wc -l <"$TMP/u.jsonl") lines"
$TFM info "$TMP/u.tfm" >"$TMP/info" 2>&1
grep -q "iters" "$TMP/info" && ! grep -qi "overwrite" "$TMP/info" \
    && pass "train-lm --overwrite is not stored in the run configuration" \
    || fail "train-lm --overwrite is not stored in the run configuration" "$(grep -i overwrite "$TMP/info")"
expect_ok "train-lm --resume with --overwrite given (not compared with the run)" \
    $TFM train-lm --resume "$TMP/u.tfm" --max-steps 4 --overwrite
