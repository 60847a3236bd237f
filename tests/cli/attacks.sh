# Issue 33: the attack campaign's findings on 5e2a54a, each kept as a regression test (finding 1, outputs over
# inputs, is tests/cli/outputs.sh; finding 7, leaks on error paths, is the sanitizer run of tests/run.sh).
#   2 a diverging run wrote a checkpoint whose validation loss was NaN and said "the last checkpoint is from before
#     it"; generate on it printed newlines and exited 0
#   3 train.step / adam.t = INT_MAX passed the range checks (signed overflow, lr -1e7); train.eval_iters = 2^20
#   4 --log-file write errors were ignored (exit 0, empty log)
#   5 values used without a cross-check: config.n_head / max_len edits, fields an architecture does not use,
#     run.* strings that are not what the run trains with, non-finite weights written by import, BPE scores
#   6 --min-lr above --lr with cosine, plot dropping values silently, sources cut without a word, a NaN demo
# Each check says what it expects; tests/cli/README-style notes are in docs/RELIABILITY.md.
source "$(dirname "$0")/lib.bash"
PY=/usr/bin/python3
FRA=../shared/data/fra-eng/fra.txt
head -c 200000 ../shared/data/tinyshakespeare/input.txt >"$TMP/ts.txt"
head -n 400 "$FRA" >"$TMP/p.tsv"
if ! $PY -c 'import numpy' 2>/dev/null; then skip "attacks" "/usr/bin/python3 has no numpy (checkpoint edits)"; exit 0; fi
# edit SRC DST NAME=VALUE...: VALUE an int, a float (with a dot), 'str:TEXT', or 'x:K' (every param.* times K)
edit() {
    $PY - "$@" <<'PYEOF'
import sys; sys.path.insert(0, 'scripts')
import numpy as np, tfmio
d = tfmio.load(sys.argv[1])
for kv in sys.argv[3:]:
    k, v = kv.split('=', 1)
    if v.startswith('x:'):
        for n in d:
            if n.startswith('param.'): d[n] = (d[n] * np.float32(float(v[2:]))).astype(np.float32)
    elif v.startswith('str:'): d[k] = v[4:]
    elif '.' in v or 'e' in v: d[k] = np.array([float(v)], np.float32)
    else: d[k] = np.array([int(v)], np.int32)
tfmio.save(sys.argv[2], d)
PYEOF
}
info_of() { $TFM info "$1" 2>/dev/null | awk -v k="$2" '$1 == k { print $2; exit }'; }
# expect_last NAME STATUS PATTERN CMD...: a run that starts (progress lines) and then stops: exit STATUS and the last
# line of stderr matching PATTERN
expect_last() {
    local name=$1 status=$2 pattern=$3; shift 3
    "$@" >"$TMP/out" 2>"$TMP/err" </dev/null
    local rc=$? last; last=$(tail -n 1 "$TMP/err")
    if [ $rc -eq "$status" ] && echo "$last" | grep -Eq -- "$pattern"; then pass "$name (exit $status)"
    else fail "$name" "exit $rc (expected $status): $last"; fi
}

# ---- 2. a diverging run never writes a non-finite checkpoint, and names the last good one truthfully
DIV="--data $TMP/ts.txt --n-layer 2 --n-head 2 --n-embd 32 --block-size 16 --batch-size 4 --eval-iters 1 --warmup 0
     --iters 40 --eval-every 1 --threads 1"
for seed in 1 2 3; do
    $TFM train-lm $DIV --lr 1e3 --seed $seed --out "$TMP/d$seed.tfm" 2>"$TMP/d.err"; rc=$?
    msg=$(tail -n 1 "$TMP/d.err")
    named=$(echo "$msg" | sed -n 's/.*the last good checkpoint: .*d'$seed'\.tfm (step \([0-9]*\))$/\1/p')
    it=$(info_of "$TMP/d$seed.tfm" iter); vl=$(info_of "$TMP/d$seed.tfm" val_loss)
    if [ $rc -eq 1 ] && echo "$msg" | grep -q 'the weights diverged (not saved)' && [ -n "$named" ] && [ "$named" = "$it" ] &&
        awk -v v="$vl" 'BEGIN { exit !(v + 0 == v && v != "nan" && v != "-nan") }'; then
        pass "train-lm --lr 1e3 (seed $seed) diverges: not saved, the last good checkpoint named (step $it, val_loss $vl)"
    else
        fail "train-lm --lr 1e3 (seed $seed)" "exit $rc, checkpoint iter '$it' val_loss '$vl': $msg"
    fi
done
expect_ok "generate on the last good checkpoint of a diverged run" $TFM generate "$TMP/d1.tfm" --tokens 20 --threads 1
rm -f "$TMP/x.tfm"
expect_last "train-lm --lr 3e38: non-finite weights after step 1, nothing saved" 1 \
    "step 1: parameter '.*' holds (inf|-inf|nan) .*the weights diverged \(not saved\).*this run saved no checkpoint" \
    $TFM train-lm $DIV --lr 3e38 --out "$TMP/x.tfm"
[ ! -e "$TMP/x.tfm" ] && pass "train-lm --lr 3e38 wrote no checkpoint" || fail "train-lm --lr 3e38" "x.tfm written"
$TFM train-lm ${DIV/--eval-every 1/--eval-every 100} --lr 1e3 --save-every 1 --out "$TMP/s.tfm" 2>"$TMP/s.err"; rc=$?
named=$(tail -n 1 "$TMP/s.err" | sed -n 's/.*the last good checkpoint: .*s\.tfm (step \([0-9]*\))$/\1/p')
[ $rc -eq 1 ] && grep -q 'loss of a validation sequence under the new weights is .*not saved' "$TMP/s.err" &&
    [ -n "$named" ] && [ "$named" = "$(info_of "$TMP/s.tfm" iter)" ] \
    && pass "train-lm --save-every 1 without an evaluation: one sequence's loss checked before the save (step $named kept)" \
    || fail "train-lm --save-every 1 divergence" "exit $rc: $(tail -n 1 "$TMP/s.err")"
MT="--tsv $TMP/p.tsv --max-len 8 --d-model 16 --n-head 2 --n-layer 1 --ffn 16 --batch-size 32 --threads 1"
$TFM train-mt $MT --epochs 3 --lr 100 --weight-decay 10 --save-every 1 --out "$TMP/md.tfm" 2>"$TMP/md.err"; rc=$?
named=$(tail -n 1 "$TMP/md.err" | sed -n 's/.*the last good checkpoint: .*md\.tfm (step \([0-9]*\))$/\1/p')
[ $rc -eq 1 ] && [ -n "$named" ] && [ "$named" = "$(info_of "$TMP/md.tfm" step)" ] \
    && pass "train-mt --lr 100 --weight-decay 10 diverges: the last good checkpoint named (step $named)" \
    || fail "train-mt divergence" "exit $rc: $(tail -n 1 "$TMP/md.err")"
# a checkpoint whose weights are finite but give NaN (x 1e30): generate and translate say so, exit 1
$TFM train-mt $MT --epochs 1 --out "$TMP/mt.tfm" 2>/dev/null
$TFM train-lm $DIV --lr 1e-3 --iters 4 --eval-every 2 --out "$TMP/lm.tfm" 2>/dev/null
edit "$TMP/lm.tfm" "$TMP/huge-lm.tfm" all=x:1e30
edit "$TMP/mt.tfm" "$TMP/huge-mt.tfm" all=x:1e30
expect_exit "generate on a model whose logits are NaN: an error" 1 "output is not finite" \
    $TFM generate "$TMP/huge-lm.tfm" --tokens 20
for beam in 1 3; do
    printf 'go .\n' | $TFM translate "$TMP/huge-mt.tfm" --beam $beam >"$TMP/out" 2>"$TMP/err"
    check_error "translate --beam $beam on a model whose logits are NaN: an error" "output is not finite" $?
done
# import refuses non-finite weights (before, a GPT import wrote them and every other command refused the file)
$TFM export "$TMP/d1.tfm" --out "$TMP/lm.st" 2>/dev/null
$PY - "$TMP/lm.st" <<'PYEOF'
import sys, struct
b = bytearray(open(sys.argv[1], 'rb').read()); n = struct.unpack('<Q', b[:8])[0]
b[8 + n:8 + n + 4] = struct.pack('<f', float('nan'))
open(sys.argv[1], 'wb').write(b)
PYEOF
expect_exit "import refuses a NaN weight" 65 "lm.st: tensor '.*' holds nan at index 0" $TFM import "$TMP/lm.st" --out "$TMP/x.tfm"

# ---- 3. step counters with room; loop bounds from a checkpoint capped
edit "$TMP/mt.tfm" "$TMP/e.tfm" train.step=2147483647
expect_last "train-mt --resume at train.step INT_MAX: refused (was a signed overflow, lr -1e7)" 1 \
    "train.step 2147483647 \+ the [0-9]+ steps left overflow the step counter" $TFM train-mt --resume "$TMP/e.tfm" --epochs 2
edit "$TMP/mt.tfm" "$TMP/e.tfm" adam.t=2147483647
expect_error "train-mt --resume with adam.t INT_MAX: refused" "adam.t 2147483647 exceeds train.step" \
    $TFM train-mt --resume "$TMP/e.tfm" --epochs 2
edit "$TMP/lm.tfm" "$TMP/e.tfm" adam.t=2147483647
expect_error "train-lm --resume with adam.t INT_MAX: refused" "adam.t 2147483647 exceeds train.iter" \
    $TFM train-lm --resume "$TMP/e.tfm" --out "$TMP/x.tfm"
edit "$TMP/lm.tfm" "$TMP/e.tfm" train.eval_iters=1048576
expect_error "train-lm --resume with train.eval_iters 2^20 (a million batches an evaluation): refused" \
    "train.eval_iters must be in 1..10000, got 1048576" $TFM train-lm --resume "$TMP/e.tfm" --out "$TMP/x.tfm"
expect_error "train-lm --eval-iters 1048576: the same bound on the command line" "--eval-iters must be in 1..10000" \
    $TFM train-lm $DIV --eval-iters 1048576 --out "$TMP/x.tfm"

# ---- 4. a failed --log-file write stops the run with a checkpoint, exit 74
expect_last "train-lm --log-file /dev/full: stopped, saved" 74 \
    "--log-file /dev/full: write failed \(No space left on device\): stopped, saved .*x.tfm at step [0-9]+" \
    $TFM train-lm $DIV --lr 1e-3 --iters 200 --eval-every 100 --log-every 10 --out "$TMP/x.tfm" --log-file /dev/full
[ -n "$(info_of "$TMP/x.tfm" iter)" ] && pass "train-lm: the checkpoint of the stop is loadable" || fail "log stop checkpoint" "none"
expect_last "train-mt --log-file /dev/full: stopped, saved" 74 \
    "--log-file /dev/full: write failed \(No space left on device\): stopped, saved .*y.tfm at step [0-9]+ \(epoch 1\)" \
    $TFM train-mt $MT --epochs 2 --out "$TMP/y.tfm" --log-file /dev/full
rm -f "$TMP/x.tfm"

# ---- 5. values cross-checked
edit "$TMP/mt.tfm" "$TMP/e.tfm" config.n_head=4
expect_exit "config.n_head edited to another divisor of d_model: translate refuses (run.n-head)" 65 \
    "e.tfm: config.n_head 4 is not run.n-head 2" $TFM translate "$TMP/e.tfm"
edit "$TMP/mt.tfm" "$TMP/e.tfm" config.max_len=1
expect_exit "config.max_len 1 (empty translations before): refused" 65 "e.tfm: config max_len must be in 2\.\." \
    $TFM translate "$TMP/e.tfm"
edit "$TMP/mt.tfm" "$TMP/e.tfm" config.max_len=5
expect_exit "config.max_len below the run's --max-len + 1: refused" 65 "config.max_len 5 is shorter than run.max-len 8" \
    $TFM translate "$TMP/e.tfm"
$TFM export "$TMP/mt.tfm" --out "$TMP/mt.st" 2>/dev/null
$PY - "$TMP/mt.st" "$TMP/mt1.st" '\"max_len\":1000' '\"max_len\":1   ' <<'PYEOF'
import sys
b = open(sys.argv[1], 'rb').read(); old, new = sys.argv[3].encode(), sys.argv[4].encode()
assert old in b and len(old) == len(new); open(sys.argv[2], 'wb').write(b.replace(old, new, 1))
PYEOF
expect_exit "import of a translator with max_len 1: refused" 65 "tfm.config: config max_len must be in 2\.\." \
    $TFM import "$TMP/mt1.st" --out "$TMP/x.tfm"
R="--tsv $TMP/p.tsv --max-len 8 --arch rnn --embed-size 8 --hidden-size 8 --n-layer 1 --batch-size 32 --epochs 1 --threads 1"
$TFM train-mt $R --out "$TMP/rnn.tfm" 2>/dev/null
edit "$TMP/rnn.tfm" "$TMP/e.tfm" config.d_model=-1
expect_exit "rnn checkpoint with config.d_model -1 (unused): refused" 65 \
    "config d_model must be 32, the default: arch rnn does not use it, got -1" $TFM translate "$TMP/e.tfm"
edit "$TMP/mt.tfm" "$TMP/e.tfm" config.embed_size=2147483647
expect_exit "transformer checkpoint with config.embed_size INT_MAX (unused): refused" 65 \
    "config embed_size must be 32, the default: arch transformer does not use it" $TFM translate "$TMP/e.tfm"
expect_error "train-mt --embed-size 2147483647 with the Transformer: refused" \
    "--embed-size 2147483647 is for --arch rnn / bahdanau: --arch transformer does not use it" \
    $TFM train-mt $MT --embed-size 2147483647 --out "$TMP/x.tfm"
expect_error "train-mt --arch rnn --d-model 64: refused" "--d-model 64 is for --arch transformer" \
    $TFM train-mt $R --d-model 64 --out "$TMP/x.tfm"
edit "$TMP/lm.tfm" "$TMP/e.tfm" run.lr=str:1e38
expect_error "train-lm --resume with run.lr 1e38 (printed while 0.001 trained): refused" \
    "e.tfm: run.lr is 1e38 but the model and training state it holds say 0.001" $TFM train-lm --resume "$TMP/e.tfm" --out "$TMP/x.tfm"
edit "$TMP/lm.tfm" "$TMP/e.tfm" run.iters=str:4x
expect_error "train-lm --resume with run.iters '4x': refused (was read as 4 by atoi)" "run.iters '4x' is not a value of --iters" \
    $TFM train-lm --resume "$TMP/e.tfm" --out "$TMP/x.tfm"
edit "$TMP/mt.tfm" "$TMP/e.tfm" train.max_len=12
expect_error "train-mt --resume with train.max_len not the run's --max-len: refused" "train.max_len 12 is not the run's 8" \
    $TFM train-mt --resume "$TMP/e.tfm" --epochs 2
# a BPE translator whose merge order was edited (one score raised above all, CRC re-sealed): refused; before, it
# loaded and tokenized differently
$TFM train-mt --tsv "$TMP/p.tsv" --tokenizer bpe --vocab-size 400 --max-len 8 --allow-truncation --d-model 16 --n-head 2 --n-layer 1 --ffn 16 \
    --epochs 1 --threads 1 --out "$TMP/bpe.tfm" 2>/dev/null
$PY - "$TMP/bpe.tfm" "$TMP/e.tfm" <<'PYEOF'
import sys, struct; sys.path.insert(0, 'scripts'); import tfmio
d = tfmio.load(sys.argv[1]); b = bytes(d['tokenizer.bpe'])
old = b'\x15' + struct.pack('<f', -40.0)   # the score of merge 40 (tfm bpe learn: merge i scores -i)
assert b.count(old) == 1
d['tokenizer.bpe'] = b.replace(old, b'\x15' + struct.pack('<f', 1e9)); tfmio.save(sys.argv[2], d)
PYEOF
expect_exit "BPE translator with an edited merge score: refused" 65 "tokenizer.bpe: piece [0-9]+ .* scores 1e\+09, above the piece before it" \
    $TFM translate "$TMP/e.tfm"

# ---- 6. smaller silent results
expect_error "train-mt --schedule cosine --min-lr 1e38: refused" "--min-lr must be in \[0, --lr 0.005\], got 1e\+38" \
    $TFM train-mt $MT --schedule cosine --min-lr 1e38 --out "$TMP/x.tfm"
printf '{"step": 1, "loss": 5}\n{"step": 2, "loss": 1e308}\n' >"$TMP/big.jsonl"
expect_exit "plot refuses a loss of 1e308 (dropped silently before)" 65 'big.jsonl:2: "loss" 1e\+308 is beyond what a plot can draw' \
    $TFM plot "$TMP/big.jsonl" --out "$TMP/x.svg"
printf '{"step": 1, "loss": 5}\n{"step": 1e39, "loss": 3}\n' >"$TMP/big.jsonl"
expect_exit "plot refuses a step beyond float range (an empty panel before)" 65 '"step" 1e\+39 is beyond what a plot can draw' \
    $TFM plot "$TMP/big.jsonl" --out "$TMP/x.svg"
printf '{"step": 1, "loss": 5}\n{"step": 2, "loss": null}\n{"step": 3, "loss": 4}\n' >"$TMP/n.jsonl"
$TFM plot "$TMP/n.jsonl" --out "$TMP/n.svg" >"$TMP/out" 2>&1
grep -q '; 1 value null, NaN or Infinity, not drawn' "$TMP/out" && pass "plot says how many values it could not draw" \
    || fail "plot undrawn values" "$(cat "$TMP/out")"
{ for _ in $(seq 5000); do printf 'go '; done; printf '.\ni lost .\n'; } >"$TMP/long.txt"
$TFM translate "$TMP/mt.tfm" <"$TMP/long.txt" >"$TMP/out" 2>"$TMP/err"; rc=$?
[ $rc -eq 0 ] && [ "$(grep -c 'warning' "$TMP/err")" -eq 1 ] &&
    grep -q 'warning: 1 of 2 source sentences were cut to 200 tokens incl. <eos> (--max-src)' "$TMP/err" \
    && pass "translate: a 5,000-word source is cut with one warning (count and flag)" || fail "translate cut warning" "$(cat "$TMP/err")"
$PY - "$TMP/mt.st" "$TMP/mt20.st" '\"max_len\":1000' '\"max_len\":20  ' <<'PYEOF'
import sys
b = open(sys.argv[1], 'rb').read(); old, new = sys.argv[3].encode(), sys.argv[4].encode()
open(sys.argv[2], 'wb').write(b.replace(old, new, 1))
PYEOF
$TFM import "$TMP/mt20.st" --out "$TMP/mt20.tfm" 2>/dev/null
$TFM attention "$TMP/mt20.tfm" --text "$(for _ in $(seq 30); do printf 'go '; done)." --out "$TMP/a.svg" >/dev/null 2>"$TMP/err"
grep -q 'warning: --text has 32 tokens incl. <eos>, cut to the model.s 20 positions' "$TMP/err" \
    && pass "attention: a source longer than the model's positions is cut with a warning" || fail "attention cut warning" "$(cat "$TMP/err")"
mkdir -p "$TMP/demo"
expect_exit "demo kernel-regression --lr 3e38: an error, no SVG (printed loss -nan and exited 0 before)" 1 "the SGD diverged" \
    $TFM demo kernel-regression --lr 3e38 --out-dir "$TMP/demo"
[ -z "$(ls "$TMP/demo")" ] && pass "demo wrote no SVG of NaN curves" || fail "demo NaN" "wrote $(ls "$TMP/demo")"

# ---- crafted inputs to average (not covered by the campaign): each input is loaded as the model it says it is
# first, so what translate / generate would refuse is refused here, and no output is written
cp "$TMP/rnn.tfm" "$TMP/rnn2.tfm"
for e in "config.d_model=-1" "config.hidden_size=9" "run.n-layer=str:3"; do
    edit "$TMP/rnn.tfm" "$TMP/c1.tfm" "$e"; edit "$TMP/rnn2.tfm" "$TMP/c2.tfm" "$e"
    rm -f "$TMP/avg.tfm"
    expect_exit "average of two rnn checkpoints both edited ($e): refused" 65 "c1.tfm: " \
        $TFM average -o "$TMP/avg.tfm" "$TMP/c1.tfm" "$TMP/c2.tfm"
    [ ! -e "$TMP/avg.tfm" ] || fail "average ($e)" "wrote an output"
done
edit "$TMP/lm.tfm" "$TMP/c1.tfm" config.vocab_size=7
expect_exit "average with a GPT input whose vocabulary does not match its config: refused" 65 \
    "c1.tfm: tokenizer has [0-9]+ characters but config.vocab_size is 7" $TFM average -o "$TMP/avg.tfm" "$TMP/lm.tfm" "$TMP/c1.tfm"
expect_exit "average with a safetensors file as input: refused" 65 "mt.st: not a tfm (file|checkpoint)" \
    $TFM average -o "$TMP/avg.tfm" "$TMP/mt.tfm" "$TMP/mt.st"
edit "$TMP/mt.tfm" "$TMP/c1.tfm" all=x:1e30
expect_ok "average of finite huge weights still averages (the loaders check values, not magnitudes)" \
    $TFM average -o "$TMP/avg.tfm" "$TMP/c1.tfm" "$TMP/c1.tfm"
args=(); for i in $(seq 257); do args+=("$TMP/mt.tfm"); done
expect_exit "average of 257 inputs: refused (at most 256)" 2 "unexpected argument" $TFM average -o "$TMP/avg2.tfm" "${args[@]}"
