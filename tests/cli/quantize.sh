# tfm quantize (int8 models): tiny trained models of every kind quantized; info says the precision; generate,
# translate (greedy, beam) and attention run them, with the same output at 1 and 2 threads; export writes them;
# bad input: an int8 input, optimizer state (a note), flags, resume/average of an int8 model, TFM_ISA naming a
# path this CPU lacks: one line each.
source "$(dirname "$0")/lib.bash"
head -c 20000 data/demo.txt >"$TMP/small.txt"
$TFM train-lm --data "$TMP/small.txt" --out "$TMP/lm.tfm" --n-layer 1 --n-head 2 --n-embd 32 --block-size 16 \
    --batch-size 4 --iters 20 --eval-every 20 --eval-iters 2 --threads 1 >/dev/null 2>&1 || fail "train-lm" "exit $?"
printf 'Go.\tVa !\nHi.\tSalut !\nRun!\tCours !\nWho?\tQui ?\nI see.\tJe vois.\nI try.\tJ'"'"'essaye.\nI won!\tJ'"'"'ai gagné !\nGo on.\tPoursuis.\n' >"$TMP/p.tsv"
for arch in transformer rnn bahdanau; do
    shape="--embed-size 8 --hidden-size 16"   # each architecture's own size flags (others are refused)
    [ $arch = transformer ] && shape="--d-model 16 --n-head 2 --ffn 16"
    $TFM train-mt --tsv "$TMP/p.tsv" --out "$TMP/$arch.tfm" --arch $arch $shape --n-layer 1 \
        --epochs 3 --batch-size 4 --min-freq 1 --threads 1 --log-every 0 >/dev/null 2>&1 \
        || fail "train-mt $arch" "exit $?"
done

# quantize: every kind; the optimizer state is left out with a note on stderr, exit 0
for m in lm transformer rnn bahdanau; do
    if $TFM quantize "$TMP/$m.tfm" --out "$TMP/$m.q8.tfm" >"$TMP/out" 2>"$TMP/err" && grep -q "in int8" "$TMP/out" \
        && grep -q "note: .*optimizer and training state .* not copied" "$TMP/err"; then
        pass "quantize $m (optimizer state dropped with a note)"
    else
        fail "quantize $m" "$(cat "$TMP/out" "$TMP/err" | head -c 300)"
    fi
done
$TFM info "$TMP/transformer.q8.tfm" >"$TMP/info" 2>&1
grep -q "^precision: int8 (tfm quantize): [0-9]* of [0-9]* tensors" "$TMP/info" && grep -q "^training state: none" "$TMP/info" \
    && grep -Eq "int8 (avx512-vnni|avx2|portable)" "$TMP/info" && pass "info says the precision and the int8 kernels" \
    || fail "info int8" "$(grep -E 'precision|kernels|training' "$TMP/info")"
$TFM info "$TMP/transformer.tfm" | grep -q "^precision: fp32" && pass "info says fp32 for an fp32 model" || fail "info fp32" "no precision: fp32"

# generate: the int8 model runs, the same text at 1 and 2 threads
g1=$($TFM generate "$TMP/lm.q8.tfm" --prompt "The " --tokens 40 --temperature 0 --threads 1 2>/dev/null)
g2=$($TFM generate "$TMP/lm.q8.tfm" --prompt "The " --tokens 40 --temperature 0 --threads 2 2>/dev/null)
[ -n "$g1" ] && [ "$g1" = "$g2" ] && pass "generate int8: same text at 1 and 2 threads" || fail "generate int8" "'$g1' vs '$g2'"

# translate: the same output at 1 and 2 threads (two batches: decoded in parallel at 2), greedy and beam 4,
# every kind (the RNN and Bahdanau encoders read the padding, as d2l's do: a batch size of their own is kept)
cut -f1 "$TMP/p.tsv" >"$TMP/src.txt"
for m in transformer rnn bahdanau; do
    for beam in 1 4; do
        $TFM translate "$TMP/$m.q8.tfm" --beam $beam --threads 1 --batch-size 4 <"$TMP/src.txt" >"$TMP/t1" 2>/dev/null
        $TFM translate "$TMP/$m.q8.tfm" --beam $beam --threads 2 --batch-size 4 <"$TMP/src.txt" >"$TMP/t2" 2>/dev/null
        if [ -s "$TMP/t1" ] && [ "$(wc -l <"$TMP/t1")" -eq 8 ] && cmp -s "$TMP/t1" "$TMP/t2"; then
            pass "translate int8 $m beam $beam: same output at 1 and 2 threads"
        else
            fail "translate int8 $m beam $beam" "$(diff "$TMP/t1" "$TMP/t2" | head -n 4)"
        fi
    done
done
expect_ok "attention on an int8 Transformer" $TFM attention "$TMP/transformer.q8.tfm" --text "Run!" --out "$TMP/a.svg"
grep -q "<svg" "$TMP/a.svg" && pass "attention int8: an SVG" || fail "attention int8" "no SVG"
expect_ok "export of an int8 model (its dequantized weights, F32)" $TFM export "$TMP/transformer.q8.tfm" --out "$TMP/q.safetensors"
$TFM quantize "$TMP/lm.tfm" --out "$TMP/lm.lin.tfm" --embeddings fp32 --output-layer fp32 >"$TMP/out" 2>/dev/null
grep -q "wrote .*: [0-9]* of [0-9]* tensors in int8" "$TMP/out" && [ "$(sed -n 's/.*: \([0-9]*\) of .*/\1/p' "$TMP/out")" -lt \
    "$(sed -n 's/.*: \([0-9]*\) of .*/\1/p' <($TFM quantize "$TMP/lm.tfm" --out "$TMP/lm.all.tfm" 2>/dev/null))" ] \
    && pass "--embeddings/--output-layer fp32 keep those tables in fp32" || fail "quantize flags" "$(cat "$TMP/out")"

# bad input: one line, nothing written
expect_exit "quantize an int8 model" 65 "already an int8 model" $TFM quantize "$TMP/lm.q8.tfm" --out "$TMP/x.tfm"
[ -e "$TMP/x.tfm" ] && fail "quantize an int8 model wrote a file" "$TMP/x.tfm" || pass "quantize an int8 model writes nothing"
expect_exit "quantize without --out" 2 "--out" $TFM quantize "$TMP/lm.tfm"
expect_exit "quantize --embeddings bf16" 2 "--embeddings must be int8 or fp32" $TFM quantize "$TMP/lm.tfm" --out "$TMP/x.tfm" --embeddings bf16
expect_exit "quantize --out = the input" 2 "" $TFM quantize "$TMP/lm.tfm" --out "$TMP/lm.tfm"
expect_exit "quantize a missing file" 74 "cannot open" $TFM quantize "$TMP/none.tfm" --out "$TMP/x.tfm"
expect_exit "quantize a text file" 65 "not a tfm file" $TFM quantize "$TMP/small.txt" --out "$TMP/x.tfm"
expect_exit "resume training from an int8 LM" 65 "int8 model .* inference only" \
    $TFM train-lm --data "$TMP/small.txt" --resume "$TMP/lm.q8.tfm" --out "$TMP/x.tfm"
expect_exit "resume training from an int8 translator" 65 "int8 model .* inference only" \
    $TFM train-mt --tsv "$TMP/p.tsv" --resume "$TMP/transformer.q8.tfm" --out "$TMP/x.tfm"
expect_exit "average int8 models" 65 "int8 model: average the fp32 checkpoints" \
    $TFM average -o "$TMP/x.tfm" "$TMP/lm.q8.tfm" "$TMP/lm.q8.tfm"
cp "$TMP/lm.q8.tfm" "$TMP/flip.tfm"
printf '\x55' | dd of="$TMP/flip.tfm" bs=1 seek=$(( $(stat -c %s "$TMP/flip.tfm") - 100 )) conv=notrunc 2>/dev/null
expect_exit "a corrupt int8 model" 65 "checksum mismatch" $TFM generate "$TMP/flip.tfm" --tokens 3
if grep -qw avx512f /proc/cpuinfo; then
    expect_ok "TFM_ISA=avx512 runs an int8 model here" env TFM_ISA=avx512 $TFM generate "$TMP/lm.q8.tfm" --tokens 3
else
    expect_exit "TFM_ISA=avx512 on a CPU without it" 2 "TFM_ISA=avx512: this CPU does not support it" \
        env TFM_ISA=avx512 $TFM translate "$TMP/transformer.q8.tfm" <"$TMP/src.txt"
fi
g3=$(TFM_ISA=generic $TFM generate "$TMP/lm.q8.tfm" --prompt "The " --tokens 40 --temperature 0 --threads 1 2>/dev/null)
[ -n "$g3" ] && pass "TFM_ISA=generic runs the int8 model (portable kernels)" || fail "TFM_ISA=generic int8" "no output"
