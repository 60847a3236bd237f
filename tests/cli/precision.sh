# --precision bf16 (train-lm, train-mt): the linear layers' GEMMs with bfloat16 operands (tfm_gemm_bf16;
# the GEMM itself is checked bit for bit in test_gemm_bf16). Here: the start-up line names it (hardware or
# emulation), it trains to a loss near fp32's, it is part of the run (a resume keeps it and refuses
# another), and a bad value is a one-line usage error.
source "$(dirname "$0")/lib.bash"
head -c 30000 data/demo.txt >"$TMP/small.txt"
ARGS=(--data "$TMP/small.txt" --n-layer 1 --n-head 2 --n-embd 32 --block-size 16 --batch-size 8 --iters 40
      --eval-every 40 --eval-iters 4 --threads 2 --seed 5)
val_loss() { sed -n 's/.*val loss \([0-9.]*\).*/\1/p' "$1" | tail -n 1; }

$TFM train-lm "${ARGS[@]}" --out "$TMP/fp32.tfm" 2>"$TMP/fp32.err" || fail "train-lm fp32" "$(tail -n 2 "$TMP/fp32.err")"
$TFM train-lm "${ARGS[@]}" --precision bf16 --out "$TMP/bf16.tfm" 2>"$TMP/bf16.err" \
    || fail "train-lm --precision bf16" "$(tail -n 2 "$TMP/bf16.err")"
grep -Eq "gemm [a-z0-9-]+; linear layers with bf16 operands \((AVX512_BF16|emulated: this CPU has no AVX512_BF16)\)" \
    "$TMP/bf16.err" && pass "train-lm --precision bf16 names how its GEMMs run" \
    || fail "bf16 start-up line" "$(grep gemm "$TMP/bf16.err")"
a=$(val_loss "$TMP/fp32.err"); b=$(val_loss "$TMP/bf16.err")
if [ -n "$a" ] && [ -n "$b" ] && awk -v a="$a" -v b="$b" 'BEGIN { d = a - b; exit !(d < 0.02 && d > -0.02) }'; then
    pass "bf16 trains to fp32's validation loss within 0.02 after 40 steps ($b vs $a)"
else
    fail "bf16 vs fp32 validation loss" "'$b' vs '$a'"
fi
cmp -s "$TMP/fp32.tfm" "$TMP/bf16.tfm" && fail "bf16 changes the weights" "the checkpoints are identical" \
    || pass "bf16 changes the weights (the GEMMs really round their operands)"
# the emulation (TFM_ISA=avx2: no AVX512_BF16 kernels) trains too
TFM_ISA=generic $TFM train-lm "${ARGS[@]}" --iters 4 --eval-every 4 --precision bf16 --out "$TMP/emu.tfm" 2>"$TMP/emu.err" \
    && grep -q "emulated" "$TMP/emu.err" && pass "TFM_ISA=generic --precision bf16 runs the emulation" \
    || fail "bf16 emulation run" "$(tail -n 2 "$TMP/emu.err")"

# part of the run: a resume continues in bf16 and refuses fp32
$TFM train-lm --resume "$TMP/bf16.tfm" --iters 44 --threads 2 2>"$TMP/res.err" \
    && grep -q "bf16 operands" "$TMP/res.err" && pass "a resume of a bf16 run continues in bf16" \
    || fail "resume keeps --precision" "$(grep -E 'gemm|error' "$TMP/res.err" | head -n 2)"
expect_error "a resume refuses another --precision" "--precision fp32 differs from the checkpoint's --precision bf16" \
    $TFM train-lm --resume "$TMP/bf16.tfm" --precision fp32 --iters 48 --out "$TMP/res2.tfm"

expect_exit "train-lm --precision fp16: usage error" 2 "--precision must be fp32 or bf16, got 'fp16'" \
    $TFM train-lm "${ARGS[@]}" --precision fp16 --out "$TMP/x.tfm"
M30K=../shared/data/multi30k
head -n 200 $M30K/train.de >"$TMP/s.de"; head -n 200 $M30K/train.en >"$TMP/s.en"
expect_exit "train-mt --precision half: usage error" 2 "--precision must be fp32 or bf16, got 'half'" \
    $TFM train-mt --src "$TMP/s.de" --tgt "$TMP/s.en" --precision half --out "$TMP/m.tfm"
$TFM train-mt --src "$TMP/s.de" --tgt "$TMP/s.en" --d-model 32 --n-head 2 --n-layer 1 --ffn 64 --batch-size 16 --max-len 32 \
    --max-steps 6 --epochs 1 --threads 2 --precision bf16 --out "$TMP/m.tfm" 2>"$TMP/m.err" \
    && grep -q "bf16 operands" "$TMP/m.err" && pass "train-mt --precision bf16 trains" \
    || fail "train-mt --precision bf16" "$(tail -n 2 "$TMP/m.err")"
