# tfm generate with the KV cache gives the same text as full recompute, also once the context slides
# past block_size (window recomputed per token); it reports tokens/s and peak RSS on stderr.
source "$(dirname "$0")/lib.bash"
head -c 20000 data/demo.txt >"$TMP/small.txt"
expect_ok "train-lm tiny model (block 16)" $TFM train-lm --data "$TMP/small.txt" --out "$TMP/g.tfm" --n-layer 2 \
    --n-head 2 --n-embd 16 --block-size 16 --batch-size 4 --iters 20 --eval-every 20 --eval-iters 1 --threads 2
for args in "--temperature 0" "--temperature 0.9 --top-k 5 --seed 7"; do
    # shellcheck disable=SC2086
    $TFM generate "$TMP/g.tfm" --prompt "ROMEO:" --tokens 60 $args --threads 2 >"$TMP/c.txt" 2>"$TMP/c.err"
    # shellcheck disable=SC2086
    $TFM generate "$TMP/g.tfm" --prompt "ROMEO:" --tokens 60 $args --threads 2 --no-kv-cache >"$TMP/n.txt" 2>/dev/null
    cmp -s "$TMP/c.txt" "$TMP/n.txt" && pass "generate KV cache == full recompute past block_size ($args)" \
        || fail "generate KV cache == full recompute ($args)" "$(head -c 200 "$TMP/c.txt") | $(head -c 200 "$TMP/n.txt")"
done
grep -q "^generated 60 tokens in .* tok/s, KV cache)" "$TMP/c.err" && grep -q "peak RSS" "$TMP/c.err" \
    && pass "generate reports tokens/s and peak RSS" || fail "generate stderr" "$(cat "$TMP/c.err")"
