# The RNN translators through the generic CLI: train-mt --arch rnn|bahdanau (short), translate (greedy
# and beam), attention (Bahdanau draws one enc-dec map, plain RNN has none), info.
source "$(dirname "$0")/lib.bash"
FRA="$(dirname "$0")/../../../shared/data/fra-eng/fra.txt"
for arch in rnn bahdanau; do
    expect_ok "train-mt --arch $arch" "$TFM" train-mt --tsv "$FRA" --num-examples 200 --arch $arch --embed-size 16 \
        --hidden-size 16 --n-layer 2 --dropout 0.1 --epochs 3 --threads 1 --out "$TMP/$arch.tfm"
    if grep -q "($arch)" "$TMP/out" "$TMP/err"; then pass "train-mt --arch $arch reports the architecture"; else fail "train-mt --arch $arch reports the architecture" "$(head -c 300 "$TMP/err")"; fi
    printf 'go .\ni lost .\n' | "$TFM" translate "$TMP/$arch.tfm" --threads 1 >"$TMP/hyp" 2>"$TMP/err"
    if [ $? -eq 0 ] && [ "$(wc -l <"$TMP/hyp")" -eq 2 ]; then pass "translate $arch greedy: one line per input"; else fail "translate $arch greedy: one line per input" "$(cat "$TMP/err")"; fi
    printf 'go .\ni lost .\n' | "$TFM" translate "$TMP/$arch.tfm" --beam 3 --threads 1 >"$TMP/hyp" 2>"$TMP/err"
    if [ $? -eq 0 ] && [ "$(wc -l <"$TMP/hyp")" -eq 2 ]; then pass "translate $arch beam 3: one line per input"; else fail "translate $arch beam 3: one line per input" "$(cat "$TMP/err")"; fi
    expect_ok "info on a $arch checkpoint" "$TFM" info "$TMP/$arch.tfm"
done
expect_ok "attention bahdanau" "$TFM" attention "$TMP/bahdanau.tfm" --text "i lost ." --out "$TMP/att.svg"
if [ -s "$TMP/att.svg" ] && grep -q '<svg' "$TMP/att.svg"; then pass "attention bahdanau writes an SVG"; else fail "attention bahdanau writes an SVG" "missing"; fi
