# train-lm --tokenizer bpe (issue 32, item 7): a BPE language model learned from the training text and stored in
# the checkpoint; evaluation lines per piece and per character; generate continues raw text (no piece markers,
# no byte pieces, valid UTF-8, the prompt first); info names the tokenizer; resume continues it bit for bit;
# flag errors. The round trip decode(encode(x)) == x on whole corpora is tests/unit/test_bpe_text.c.
source "$(dirname "$0")/lib.bash"
cd "$(dirname "$0")/../.."
LM=(--data data/demo.txt --tokenizer bpe --vocab-size 400 --n-layer 1 --n-head 2 --n-embd 32 --block-size 32 --batch-size 4
    --eval-iters 2 --eval-every 20 --threads 1 --log-every 10)
expect_ok "train-lm --tokenizer bpe --vocab-size 400" "$TFM" train-lm "${LM[@]}" --iters 40 --out "$TMP/b.tfm"
grep -q "^learned a BPE model of 400 pieces from data/demo.txt: [0-9.]* pieces per character (train)" "$TMP/err" \
    && grep -q "vocab 400 (BPE pieces)" "$TMP/err" && pass "train-lm learns a 400-piece BPE model from the text" \
    || fail "train-lm learns BPE" "$(head -n 3 "$TMP/err")"
line=$(grep '^step 40: ' "$TMP/err")
if [[ $line =~ val\ loss\ ([0-9.]+)\ per\ BPE\ piece\ \(per\ character:\ train\ [0-9.]+,\ val\ ([0-9.]+)\) ]]; then
    pc=$(awk -v t="${BASH_REMATCH[1]}" -v c="${BASH_REMATCH[2]}" 'BEGIN { print (c < t) }')
    [ "$pc" = 1 ] && pass "evaluation lines: loss per piece and per character (smaller: a piece is > 1 character)" \
        || fail "per-character loss" "$line"
else fail "evaluation line" "'$line'"; fi
"$TFM" info "$TMP/b.tfm" >"$TMP/info"
grep -q '^tokenizer: BPE (tfm bpe, SentencePiece model), 400 pieces$' "$TMP/info" && grep -Eq '^  vocab_size +400$' "$TMP/info" \
    && pass "info: the checkpoint holds the BPE model" || fail "info BPE LM" "$(grep -i 'token\|vocab' "$TMP/info")"
"$TFM" generate "$TMP/b.tfm" --prompt "ROMEO:" --tokens 120 --temperature 0.8 --seed 3 >"$TMP/gen" 2>"$TMP/gen.err"
rc=$?
if [ $rc -eq 0 ] && head -c 6 "$TMP/gen" | grep -q '^ROMEO:' && iconv -f UTF-8 -t UTF-8 "$TMP/gen" >/dev/null 2>&1 \
   && ! grep -q $'\u2581' "$TMP/gen" && ! grep -q '<0x' "$TMP/gen" && [ "$(wc -c <"$TMP/gen")" -gt 100 ]; then
    pass "generate prints raw text: the prompt, then valid UTF-8 without piece markers or byte pieces"
else fail "generate raw text" "exit $rc: $(head -c 200 "$TMP/gen") $(cat "$TMP/gen.err")"; fi
grep -q "generated 120 tokens" "$TMP/gen.err" && pass "generate counts BPE tokens" || fail "generate token count" "$(cat "$TMP/gen.err")"
# resume: 40 steps then 40 more = 80 in one go
"$TFM" train-lm "${LM[@]}" --iters 80 --out "$TMP/full.tfm" 2>/dev/null
"$TFM" train-lm "${LM[@]}" --iters 80 --max-steps 40 --out "$TMP/half.tfm" 2>/dev/null
expect_ok "resume a BPE language model" "$TFM" train-lm --resume "$TMP/half.tfm" --threads 1
cmp -s "$TMP/full.tfm" "$TMP/half.tfm" && pass "BPE LM: resumed run = uninterrupted run (same checkpoint bytes)" \
    || fail "BPE LM resume" "checkpoints differ"
expect_exit "--vocab-size without --tokenizer bpe" 2 "--vocab-size needs --tokenizer bpe" \
    "$TFM" train-lm --data data/demo.txt --vocab-size 300 --out "$TMP/x.tfm"
expect_exit "--tokenizer bpe without --vocab-size" 2 "--tokenizer bpe needs --vocab-size N" \
    "$TFM" train-lm --data data/demo.txt --tokenizer bpe --out "$TMP/x.tfm"
expect_exit "unknown --tokenizer" 2 "--tokenizer: unknown 'word' \(char, bpe\)" \
    "$TFM" train-lm --data data/demo.txt --tokenizer word --out "$TMP/x.tfm"
expect_exit "--vocab-size below the alphabet" 2 "--vocab-size 100: " \
    "$TFM" train-lm --data data/demo.txt --tokenizer bpe --vocab-size 100 --out "$TMP/x.tfm"
[ ! -e "$TMP/x.tfm" ] && pass "nothing written on bad flags" || fail "bad flags wrote a checkpoint" "x.tfm"
