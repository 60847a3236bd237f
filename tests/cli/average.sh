# tfm average: checkpoints of every model kind (GPT LM; transformer, rnn, bahdanau translators) taken
# at two points of one run are averaged into a model that translate/generate/info accept; the average
# of a model with itself decodes exactly like the model; mismatched models, -o equal to an input and
# bad arguments are refused with one line and nothing written.
source "$(dirname "$0")/lib.bash"
FRA="$(dirname "$0")/../../../shared/data/fra-eng/fra.txt"
head -c 20000 data/demo.txt >"$TMP/small.txt"

# same-output check: NAME CMD... runs CMD with MODEL replaced by a.tfm and by avg(a, a)
same_output() {
    local name=$1 a=$2 aa=$3; shift 3
    "${@/MODEL/$a}" >"$TMP/o1" 2>/dev/null </dev/null
    "${@/MODEL/$aa}" >"$TMP/o2" 2>/dev/null </dev/null
    if [ -s "$TMP/o1" ] && cmp -s "$TMP/o1" "$TMP/o2"; then pass "$name"; else fail "$name" "outputs differ or empty"; fi
}

# ---- translators: checkpoints after epoch 2 and epoch 3 of one run
for arch in transformer rnn bahdanau; do
    case $arch in transformer) sizes="--d-model 16 --ffn 32";; *) sizes="--embed-size 16 --hidden-size 16";; esac
    flags="--tsv $FRA --num-examples 200 --arch $arch $sizes --threads 1 --log-every 0 --out $TMP/run_$arch.tfm"
    $TFM train-mt $flags --epochs 2 >/dev/null 2>&1 && cp "$TMP/run_$arch.tfm" "$TMP/${arch}_a.tfm"
    $TFM train-mt $flags --epochs 3 --resume "$TMP/run_$arch.tfm" >/dev/null 2>&1 && cp "$TMP/run_$arch.tfm" "$TMP/${arch}_b.tfm"
    expect_ok "average $arch (epochs 2 and 3)" $TFM average -o "$TMP/${arch}_avg.tfm" "$TMP/${arch}_a.tfm" "$TMP/${arch}_b.tfm"
    printf 'go .\ni lost .\n' | $TFM translate "$TMP/${arch}_avg.tfm" --threads 1 >"$TMP/hyp" 2>"$TMP/err"
    if [ $? -eq 0 ] && [ "$(wc -l <"$TMP/hyp")" -eq 2 ]; then pass "translate with averaged $arch"; else fail "translate with averaged $arch" "$(tail -n 1 "$TMP/err")"; fi
    if $TFM info "$TMP/${arch}_avg.tfm" 2>&1 | grep -Eq "^  averaged +(mean of 2 checkpoints: ${arch}_a.tfm ${arch}_b.tfm|\([0-9]+ bytes of text\))$"; then pass "info shows $arch average";
    else fail "info shows $arch average" "$($TFM info "$TMP/${arch}_avg.tfm" 2>&1 | head -c 300)"; fi
    $TFM average -o "$TMP/${arch}_aa.tfm" "$TMP/${arch}_a.tfm" "$TMP/${arch}_a.tfm" >/dev/null 2>&1
    printf 'go .\ni lost .\nhe is calm .\n' >"$TMP/src.txt"
    same_output "average of $arch with itself translates like it (beam 3)" "$TMP/${arch}_a.tfm" "$TMP/${arch}_aa.tfm" \
        bash -c "$TFM translate MODEL --beam 3 --threads 1 <$TMP/src.txt"
done

# ---- GPT: a checkpoint after 10 steps and the same run resumed to 20
TINY="--n-layer 1 --n-head 2 --n-embd 16 --block-size 16 --batch-size 4 --eval-iters 2 --eval-every 10 --threads 1"
$TFM train-lm --data "$TMP/small.txt" --out "$TMP/lm.tfm" $TINY --iters 20 --max-steps 10 >/dev/null 2>&1 && cp "$TMP/lm.tfm" "$TMP/lm_a.tfm"
$TFM train-lm --data "$TMP/small.txt" --out "$TMP/lm.tfm" --resume "$TMP/lm.tfm" --threads 1 >/dev/null 2>&1 && cp "$TMP/lm.tfm" "$TMP/lm_b.tfm"
expect_ok "average gpt (steps 10 and 20)" $TFM average -o "$TMP/lm_avg.tfm" "$TMP/lm_a.tfm" "$TMP/lm_b.tfm"
expect_ok "generate with averaged gpt" $TFM generate "$TMP/lm_avg.tfm" --tokens 20 --threads 1
$TFM average -o "$TMP/lm_aa.tfm" "$TMP/lm_a.tfm" "$TMP/lm_a.tfm" >/dev/null 2>&1
same_output "average of gpt with itself generates like it" "$TMP/lm_a.tfm" "$TMP/lm_aa.tfm" \
    $TFM generate MODEL --tokens 40 --seed 3 --threads 1
if $TFM info "$TMP/lm_avg.tfm" 2>&1 | grep -q "weights only"; then pass "averaged gpt has no training state"; else fail "averaged gpt has no training state" "info does not say weights only"; fi
expect_error "averaged gpt cannot be resumed" "." $TFM train-lm --data "$TMP/small.txt" --out "$TMP/lm_avg.tfm" --resume "$TMP/lm_avg.tfm" --threads 1

# ---- mismatches: one line naming the file and the entry, no output
$TFM train-mt --tsv $FRA --num-examples 200 --d-model 32 --ffn 32 --epochs 1 --threads 1 --log-every 0 --out "$TMP/wide.tfm" >/dev/null 2>&1
$TFM train-mt --tsv $FRA --num-examples 300 --d-model 16 --ffn 32 --epochs 1 --threads 1 --log-every 0 --out "$TMP/more.tfm" >/dev/null 2>&1
expect_error "refuses gpt + transformer" "transformer_b.tfm: entry 'meta.kind' differs from .*lm_a.tfm" \
    $TFM average -o "$TMP/x.tfm" "$TMP/lm_a.tfm" "$TMP/transformer_b.tfm"
expect_error "refuses transformer + rnn" "rnn_a.tfm: entry 'meta.arch' differs" \
    $TFM average -o "$TMP/x.tfm" "$TMP/transformer_a.tfm" "$TMP/rnn_a.tfm"
expect_error "refuses different d_model" "wide.tfm: entry 'config.d_model' is 32 but 16 in .*transformer_a.tfm" \
    $TFM average -o "$TMP/x.tfm" "$TMP/transformer_a.tfm" "$TMP/transformer_b.tfm" "$TMP/wide.tfm"
expect_error "refuses different vocabulary" "more.tfm: entry 'config.src_vocab' is [0-9]+ but [0-9]+ in" \
    $TFM average -o "$TMP/x.tfm" "$TMP/transformer_a.tfm" "$TMP/more.tfm"
[ ! -e "$TMP/x.tfm" ] && pass "nothing written on error" || fail "nothing written on error" "x.tfm exists"
cp "$TMP/transformer_a.tfm" "$TMP/keep.tfm"
expect_error "refuses -o equal to an input" "-o .*transformer_a.tfm is the input file .*transformer_a.tfm \(IN.tfm\)" \
    $TFM average -o "$TMP/transformer_a.tfm" "$TMP/transformer_b.tfm" "$TMP/transformer_a.tfm"
cmp -s "$TMP/keep.tfm" "$TMP/transformer_a.tfm" && pass "input untouched" || fail "input untouched" "transformer_a.tfm changed"
printf 'TFMC\1\0\0\0' >"$TMP/trunc.tfm"
expect_error "refuses a corrupt input" "trunc.tfm" $TFM average -o "$TMP/x.tfm" "$TMP/transformer_a.tfm" "$TMP/trunc.tfm"
expect_error "refuses a missing input" "nope.tfm" $TFM average -o "$TMP/x.tfm" "$TMP/transformer_a.tfm" "$TMP/nope.tfm"
expect_error "needs -o" "-o OUT.tfm is required" $TFM average "$TMP/transformer_a.tfm" "$TMP/transformer_b.tfm"
expect_error "needs two inputs" "missing argument" $TFM average -o "$TMP/x.tfm" "$TMP/transformer_a.tfm"
expect_error "output directory missing" "nodir/x.tfm" $TFM average -o "$TMP/nodir/x.tfm" "$TMP/transformer_a.tfm" "$TMP/transformer_b.tfm"
[ ! -e "$TMP/x.tfm" ] && pass "nothing written on bad arguments" || fail "nothing written on bad arguments" "x.tfm exists"
