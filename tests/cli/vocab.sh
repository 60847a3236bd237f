#!/usr/bin/env bash
# One command-line vocabulary (issue 9 item 6, issue 11 item 1): tfm help CMD, the help printer, the shared
# flags of train-lm and train-mt (--resume PATH, --max-steps as the run's global step, --log-file, one
# default seed), --max-output, and the exit statuses (man tfm, EXIT STATUS: 2 usage, 65 bad input data,
# 74 I/O failure). Run from the repo root.
source "$(dirname "$0")/lib.bash"
TFM=${TFM:-build/tfm}

# ---- tfm help CMD
"$TFM" help train-lm >"$TMP/h1" 2>&1; "$TFM" train-lm --help >"$TMP/h2" 2>&1
cmp -s "$TMP/h1" "$TMP/h2" && grep -q '^usage: tfm train-lm' "$TMP/h1" && pass "tfm help train-lm = tfm train-lm --help" \
    || fail "tfm help train-lm" "$(head -n 1 "$TMP/h1")"
"$TFM" help bpe learn >"$TMP/h1" 2>&1; "$TFM" bpe learn --help >"$TMP/h2" 2>&1
cmp -s "$TMP/h1" "$TMP/h2" && pass "tfm help bpe learn = tfm bpe learn --help" || fail "tfm help bpe learn" "$(head -n 1 "$TMP/h1")"
"$TFM" help >"$TMP/h1"; "$TFM" --help >"$TMP/h2"
cmp -s "$TMP/h1" "$TMP/h2" && pass "tfm help = tfm --help" || fail "tfm help" "differs from tfm --help"
expect_exit "tfm help of an unknown command" 2 "unknown command 'nope'" "$TFM" help nope

# ---- the help printer: one line a flag, one default a flag, control characters escaped
bad=""
for c in train-lm train-mt generate translate bleu average export import plot info attention "bpe learn" "bpe encode" \
         "demo kernel-regression"; do
    # shellcheck disable=SC2086
    "$TFM" $c --help >"$TMP/h" 2>&1 || bad="$bad [$c: exit $?]"
    awk '/^options:/ { on = 1; next } on && !/^  --/ { print }' "$TMP/h" | grep -q . && bad="$bad [$c: a flag line broken]"
    grep -q '(default.*(default' "$TMP/h" && bad="$bad [$c: two defaults on a line]"
done
[ -z "$bad" ] && pass "every --help: one line and at most one default per flag" || fail "help printer" "$bad"
"$TFM" generate --help | grep -qF -- '(default \n)' && pass "generate --help escapes the newline default of --prompt" \
    || fail "generate --help --prompt" "$("$TFM" generate --help | grep -A1 -- --prompt)"

# ---- the shared flags: same names, same defaults where the meaning is shared
for flag in "--resume S" "--max-steps N" "--log-every N" "--log-file S" "--seed N" "--beta1 X" "--beta2 X" "--threads N" \
            "--save-every N" "--keep-last N" "--skip-nonfinite N" "--allow-new-data" "--profile" "--eval-every N"; do
    a=$("$TFM" train-lm --help | grep -E "^  ${flag} " | grep -o '(default [^()]*)$')
    b=$("$TFM" train-mt --help | grep -E "^  ${flag} " | grep -o '(default [^()]*)$')
    "$TFM" train-lm --help | grep -qE "^  ${flag} " && "$TFM" train-mt --help | grep -qE "^  ${flag} " \
        || { fail "both trainers have $flag" "missing in one"; continue; }
    case $flag in
        "--beta2 X"|"--eval-every N") pass "both trainers have $flag (documented different defaults: $a / $b)" ;;
        *) [ "$a" = "$b" ] && pass "both trainers have $flag${a:+ $a}" || fail "$flag default" "train-lm $a, train-mt $b" ;;
    esac
done
for c in train-lm train-mt; do
    "$TFM" $c --help | grep -qE '^  --(stop-after|valid-every) ' && fail "$c: old flag names gone" "still listed" \
        || pass "$c: no --stop-after / --valid-every"
done
for c in translate attention; do
    "$TFM" $c --help | grep -qE '^  --max-output N ' && ! "$TFM" $c --help | grep -qE '^  --max-len ' \
        && pass "$c: --max-output (the decoding limit), no --max-len" || fail "$c --max-output" "flag missing or --max-len left"
done

"$TFM" attention --help | grep -qE '^  --text S ' && ! "$TFM" attention --help | grep -qE '^  --src ' \
    && pass "attention: --text for its sentence (--src is train-mt's file)" || fail "attention --text" "missing or --src left"

# ---- train-lm: --max-steps is the run's global step, across resumes; --log-file for tfm plot
head -c 20000 ../shared/data/tinyshakespeare/input.txt >"$TMP/s.txt" 2>/dev/null || seq 1 5000 >"$TMP/s.txt"
LM="--n-layer 1 --n-head 2 --n-embd 16 --block-size 16 --batch-size 4 --threads 1 --iters 20 --eval-every 10 --eval-iters 2"
iter_of() { "$TFM" info "$1" | awk '$1 == "iter" || $1 == "step" { print $2; exit }'; }
"$TFM" train-lm --data "$TMP/s.txt" --out "$TMP/full.tfm" $LM --log-file "$TMP/lm.jsonl" 2>/dev/null   # the same log:
rm -f "$TMP/lm.jsonl"                                                                 # it is part of the run
"$TFM" train-lm --data "$TMP/s.txt" --out "$TMP/a.tfm" $LM --max-steps 5 --log-file "$TMP/lm.jsonl" 2>/dev/null
s1=$(iter_of "$TMP/a.tfm")
"$TFM" train-lm --resume "$TMP/a.tfm" --max-steps 12 --threads 1 2>/dev/null; s2=$(iter_of "$TMP/a.tfm")
"$TFM" train-lm --resume "$TMP/a.tfm" --max-steps 12 2>"$TMP/err"; rc=$?
[ "$s1" = 5 ] && [ "$s2" = 12 ] && [ $rc -eq 0 ] && grep -q "nothing to do" "$TMP/err" \
    && pass "train-lm --max-steps 5, then --resume --max-steps 12: steps 5 and 12 (the run's step), then nothing to do" \
    || fail "train-lm --max-steps" "steps $s1, $s2; rc $rc: $(tail -n 1 "$TMP/err")"
"$TFM" train-lm --resume "$TMP/a.tfm" --out "$TMP/b.tfm" --threads 1 2>/dev/null   # the bits depend on the thread count
[ "$(iter_of "$TMP/a.tfm")" = 12 ] && cmp -s "$TMP/b.tfm" "$TMP/full.tfm" \
    && pass "train-lm --resume A --out B: B is the uninterrupted run, A untouched" || fail "train-lm --resume --out" "differs"
expect_exit "train-lm --resume with a conflicting flag names both values" 2 "--lr 0.01 differs from the checkpoint's --lr 0.001" \
    "$TFM" train-lm --resume "$TMP/a.tfm" --lr 0.01
grep -q '"event": "valid", "step": 5' "$TMP/lm.jsonl" && "$TFM" plot "$TMP/lm.jsonl" --out "$TMP/lm.svg" >/dev/null 2>&1 \
    && grep -q '<svg' "$TMP/lm.svg" && pass "train-lm --log-file: JSON lines that tfm plot draws" \
    || fail "train-lm --log-file" "$(head -n 2 "$TMP/lm.jsonl")"

# ---- train-mt: --resume PATH (--out optional), --max-steps the same
printf 'go .\tva !\nhi .\tsalut .\nrun !\tcours !\nwow !\tça alors !\n' >"$TMP/e.tsv"
MT="--tsv $TMP/e.tsv --d-model 8 --n-head 2 --n-layer 1 --ffn 8 --epochs 3 --batch-size 1 --min-freq 1 --threads 1 --log-every 0"
"$TFM" train-mt $MT --out "$TMP/mfull.tfm" 2>/dev/null
"$TFM" train-mt $MT --out "$TMP/m.tfm" --max-steps 3 2>/dev/null; m1=$(iter_of "$TMP/m.tfm")
"$TFM" train-mt --resume "$TMP/m.tfm" --max-steps 6 --out "$TMP/m2.tfm" 2>/dev/null
m2=$(iter_of "$TMP/m2.tfm"); m1b=$(iter_of "$TMP/m.tfm")
"$TFM" train-mt --resume "$TMP/m2.tfm" 2>/dev/null
[ "$m1" = 3 ] && [ "$m2" = 6 ] && [ "$m1b" = 3 ] && cmp -s "$TMP/m2.tfm" "$TMP/mfull.tfm" \
    && pass "train-mt --max-steps 3, --resume A --out B --max-steps 6, --resume B: steps 3 and 6, A kept, B = the uninterrupted run" \
    || fail "train-mt --resume PATH / --max-steps" "steps $m1 $m2 (A now $m1b); identical: $(cmp -s "$TMP/m2.tfm" "$TMP/mfull.tfm" && echo yes || echo no)"
expect_exit "train-mt --resume with a conflicting flag names both values" 2 "--d-model 16 differs from the checkpoint's --d-model 8" \
    "$TFM" train-mt --resume "$TMP/m.tfm" --d-model 16

# ---- exit statuses: 2 usage, 65 bad input data, 74 I/O failure
expect_exit "usage: unknown flag" 2 "unknown flag --bogus" "$TFM" info "$TMP/a.tfm" --bogus
expect_exit "usage: bad flag value" 2 "--iters: 'ten' is not an integer" "$TFM" train-lm --data "$TMP/s.txt" --out "$TMP/x.tfm" --iters ten
expect_exit "usage: missing required flag" 2 "--data FILE is required" "$TFM" train-lm --out "$TMP/x.tfm"
expect_exit "usage: unknown command" 2 "unknown command" "$TFM" nope
cp "$TMP/a.tfm" "$TMP/flip.tfm"
printf '\x55' | dd of="$TMP/flip.tfm" bs=1 seek=$(( $(stat -c %s "$TMP/flip.tfm") / 2 )) conv=notrunc 2>/dev/null
cmp -s "$TMP/flip.tfm" "$TMP/a.tfm" && printf '\xaa' | dd of="$TMP/flip.tfm" bs=1 seek=$(( $(stat -c %s "$TMP/flip.tfm") / 2 )) conv=notrunc 2>/dev/null
expect_exit "data: corrupted checkpoint (info)" 65 "flip.tfm" "$TFM" info "$TMP/flip.tfm"
expect_exit "data: corrupted checkpoint (generate)" 65 "flip.tfm" "$TFM" generate "$TMP/flip.tfm" --tokens 5
expect_exit "data: corrupted checkpoint (train-lm --resume)" 65 "flip.tfm" "$TFM" train-lm --resume "$TMP/flip.tfm"
printf 'abc\xff\xfedef\n' >"$TMP/bad.txt"
expect_exit "data: invalid UTF-8 text" 65 "bad.txt:1: invalid UTF-8" "$TFM" train-lm --data "$TMP/bad.txt" --out "$TMP/x.tfm"
printf 'no tab here\n' >"$TMP/bad.tsv"
expect_exit "data: a TSV line without a tab" 65 "bad.tsv:1: no tab" "$TFM" train-mt --tsv "$TMP/bad.tsv" --out "$TMP/x.tfm"
printf 'not a model' >"$TMP/bad.model"
expect_exit "data: a malformed BPE model" 65 "bad.model" "$TFM" bpe encode --model "$TMP/bad.model"
printf '{"step": 1, \n' >"$TMP/bad.jsonl"
expect_exit "data: a malformed log line (plot)" 65 "bad.jsonl:1" "$TFM" plot "$TMP/bad.jsonl" --out "$TMP/x.svg"
printf '\x10\x00\x00\x00\x00\x00\x00\x00{"a": [1, 2, 3]}' >"$TMP/bad.safetensors"
expect_exit "data: a malformed safetensors file (import)" 65 "bad.safetensors" "$TFM" import "$TMP/bad.safetensors" --out "$TMP/x.tfm"
printf 'go .\n\xff\xfe\n' >"$TMP/bad.src"
expect_exit "data: invalid UTF-8 on translate's stdin" 65 "stdin:2: invalid UTF-8" sh -c '"$1" translate "$2" <"$3"' _ "$TFM" "$TMP/m.tfm" "$TMP/bad.src"
printf 'a\nb\n' >"$TMP/h.txt"; printf 'a\n' >"$TMP/r.txt"
expect_exit "data: hypotheses and references not aligned (bleu)" 65 "2 lines but" "$TFM" bleu "$TMP/h.txt" "$TMP/r.txt"
expect_exit "I/O: missing checkpoint" 74 "cannot open" "$TFM" info "$TMP/none.tfm"
expect_exit "I/O: missing training text" 74 "none.txt: cannot.*No such file" "$TFM" train-lm --data "$TMP/none.txt" --out "$TMP/x.tfm"
expect_exit "I/O: --out in a directory that does not exist" 74 "cannot write $TMP/nodir/x.tfm" \
    "$TFM" train-lm --data "$TMP/s.txt" --out "$TMP/nodir/x.tfm"
expect_exit "I/O: missing safetensors file (import)" 74 "none.safetensors: cannot open" \
    "$TFM" import "$TMP/none.safetensors" --out "$TMP/x.tfm"
"$TFM" info "$TMP/a.tfm" >/dev/full 2>"$TMP/err"; rc=$?
[ $rc -eq 74 ] && grep -q "cannot write standard output" "$TMP/err" && pass "I/O: stdout not writable (exit 74)" \
    || fail "I/O: stdout not writable" "exit $rc: $(cat "$TMP/err")"
