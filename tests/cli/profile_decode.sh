# --profile on the decoding commands: translate (transformer and rnn, greedy and beam) and generate print
# the profile table (ms per sentence / token by op kind and the kv_cache and search phases) on stderr,
# and stdout is byte-for-byte the same as without --profile.
source "$(dirname "$0")/lib.bash"
FRA="$(dirname "$0")/../../../shared/data/fra-eng/fra.txt"
expect_ok "train-mt transformer (small)" "$TFM" train-mt --tsv "$FRA" --num-examples 300 --d-model 16 --n-head 2 \
    --n-layer 2 --ffn 32 --epochs 30 --threads 2 --log-every 0 --out "$TMP/tf.tfm"
expect_ok "train-mt rnn (small)" "$TFM" train-mt --tsv "$FRA" --num-examples 200 --arch rnn --embed-size 16 \
    --hidden-size 16 --epochs 2 --threads 1 --log-every 0 --out "$TMP/rnn.tfm"
cut -f1 "$FRA" | head -n 40 >"$TMP/src.txt"
n=$(grep -c '[^[:space:]]' "$TMP/src.txt")
for model in tf rnn; do
    for beam in 1 4; do
        name="translate $model --beam $beam"
        "$TFM" translate "$TMP/$model.tfm" --beam $beam --alpha 0.6 --threads 2 <"$TMP/src.txt" >"$TMP/plain.out" 2>/dev/null
        "$TFM" translate "$TMP/$model.tfm" --beam $beam --alpha 0.6 --threads 2 --profile <"$TMP/src.txt" \
            >"$TMP/prof.out" 2>"$TMP/prof.err"
        rc=$?
        if [ $rc -eq 0 ] && cmp -s "$TMP/plain.out" "$TMP/prof.out" && [ "$(wc -l <"$TMP/prof.out")" -eq 40 ]; then
            pass "$name: --profile leaves stdout unchanged"
        else fail "$name: --profile leaves stdout unchanged" "rc $rc: $(head -c 300 "$TMP/prof.err")"; fi
        ok=1
        grep -q "^profile (ms per sentence over $n sentences" "$TMP/prof.err" || ok=0
        for row in linear search "(untracked)" total; do
            grep -Eq "^  $(printf '%s' "$row" | sed 's/[()]/\\&/g') +[0-9]" "$TMP/prof.err" || ok=0
        done
        if [ $model = tf ]; then grep -Eq "^  (attention|kv_cache) +[0-9]" "$TMP/prof.err" || ok=0; fi
        [ $beam = 4 ] && { grep -Eq "^  kv_cache +[0-9]" "$TMP/prof.err" || ok=0; }
        grep -q "peak RSS" "$TMP/prof.err" || ok=0
        if [ $ok = 1 ]; then pass "$name --profile prints the profile (ops, kv_cache, search, total)"
        else fail "$name --profile prints the profile" "$(head -c 600 "$TMP/prof.err")"; fi
    done
done
# translate decodes its batches in parallel, one per thread (tfm_translate_lines_par): the outputs are the
# ones of one thread, byte for byte (40 lines in batches of 5: 8 batches over 2 threads), and the same as
# one batch of all 40 lines, where every op is split over the threads instead
for model in tf rnn; do
    for beam in 1 4; do
        for run in "1 5" "2 5" "2 40"; do
            set -- $run
            "$TFM" translate "$TMP/$model.tfm" --beam $beam --alpha 0.6 --threads $1 --batch-size $2 <"$TMP/src.txt" \
                >"$TMP/par.$1.$2" 2>"$TMP/par.err" || fail "translate $model --beam $beam --threads $1 --batch-size $2" "$(cat "$TMP/par.err")"
        done
        if [ "$(wc -l <"$TMP/par.1.5")" -eq 40 ] && cmp -s "$TMP/par.1.5" "$TMP/par.2.5" && cmp -s "$TMP/par.1.5" "$TMP/par.2.40"; then
            pass "translate $model --beam $beam: batches in parallel (2 threads) = 1 thread = one batch"
        else fail "translate $model --beam $beam: batches in parallel = 1 thread = one batch" \
            "$(diff "$TMP/par.1.5" "$TMP/par.2.5" | head -n 4) | $(diff "$TMP/par.1.5" "$TMP/par.2.40" | head -n 4)"; fi
    done
done
# without --profile nothing of the kind is printed
"$TFM" translate "$TMP/tf.tfm" --beam 4 --threads 2 <"$TMP/src.txt" >/dev/null 2>"$TMP/plain.err"
if grep -q "^profile" "$TMP/plain.err"; then fail "translate without --profile prints no profile" "$(cat "$TMP/plain.err")"
else pass "translate without --profile prints no profile"; fi
"$TFM" translate --help >"$TMP/help" 2>&1
grep -q -- "--profile" "$TMP/help" && pass "translate --help documents --profile" || fail "translate --help" "no --profile"

head -c 20000 data/demo.txt >"$TMP/small.txt"
expect_ok "train-lm tiny model" "$TFM" train-lm --data "$TMP/small.txt" --out "$TMP/g.tfm" --n-layer 2 --n-head 2 \
    --n-embd 16 --block-size 16 --batch-size 4 --iters 20 --eval-every 20 --eval-iters 1 --threads 2
for cache in "" "--no-kv-cache"; do
    # shellcheck disable=SC2086
    "$TFM" generate "$TMP/g.tfm" --prompt "ROMEO:" --tokens 40 --temperature 0.9 --top-k 5 --seed 3 --threads 2 $cache \
        >"$TMP/g.plain" 2>/dev/null
    # shellcheck disable=SC2086
    "$TFM" generate "$TMP/g.tfm" --prompt "ROMEO:" --tokens 40 --temperature 0.9 --top-k 5 --seed 3 --threads 2 $cache \
        --profile >"$TMP/g.prof" 2>"$TMP/g.err"
    name="generate ${cache:-(KV cache)} --profile"
    cmp -s "$TMP/g.plain" "$TMP/g.prof" && pass "$name leaves stdout unchanged" \
        || fail "$name leaves stdout unchanged" "$(head -c 200 "$TMP/g.plain") | $(head -c 200 "$TMP/g.prof")"
    ok=1
    grep -q "^profile (ms per token over 40 tokens" "$TMP/g.err" || ok=0
    for row in attention search total; do grep -Eq "^  $row +[0-9]" "$TMP/g.err" || ok=0; done
    [ -z "$cache" ] && { grep -Eq "^  kv_cache +[0-9]" "$TMP/g.err" || ok=0; }
    grep -q "^generated 40 tokens" "$TMP/g.err" || ok=0
    if [ $ok = 1 ]; then pass "$name prints the profile (ops, kv_cache, search, total)"
    else fail "$name prints the profile" "$(head -c 600 "$TMP/g.err")"; fi
done
"$TFM" generate --help >"$TMP/help" 2>&1
grep -q -- "--profile" "$TMP/help" && pass "generate --help documents --profile" || fail "generate --help" "no --profile"
