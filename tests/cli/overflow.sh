# Size arithmetic on user-controlled numbers (issue 11, item 6): huge flag values that multiply into
# allocation sizes (batch x block, batch x max-len, epochs x steps, sentences x beam x length, the
# parameter count a config implies) end in a one-line error naming the flags, a non-zero exit and no
# crash, abort or multi-GB allocation (the runs are limited to 4 GB of address space). Flags whose
# huge values the existing tests already cover (train-lm --batch-size/--threads/--warmup, train-mt
# --threads/--warmup, generate --tokens: reliability.sh) are not repeated.
source "$(dirname "$0")/lib.bash"
T=$TMP
# expect_refused NAME PATTERN STDIN CMD...: exit 1..127, the last stderr line matches PATTERN, no abort.
expect_refused() {
    local name=$1 pattern=$2 in=$3; shift 3
    ( if ! grep -q __asan_init "$TFM" 2>/dev/null; then ulimit -v 4000000; fi; "$@" <"$in" >"$T/out" 2>"$T/err" )
    local rc=$?
    if [ "$rc" -eq 0 ]; then fail "$name" "exit 0 (expected an error)"; return; fi
    if [ "$rc" -ge 128 ]; then fail "$name" "crashed (exit $rc): $(tail -c 300 "$T/err")"; return; fi
    if grep -q "internal error" "$T/err"; then fail "$name" "$(grep "internal error" "$T/err")"; return; fi
    if ! tail -n 1 "$T/err" | grep -Eq -- "$pattern"; then fail "$name" "last line '$(tail -n 1 "$T/err")' does not match /$pattern/"; return; fi
    pass "$name"
}
N=/dev/null
printf 'go .\tva !\nhi .\tsalut .\nrun !\tcours !\nwho ?\tqui ?\nwow !\tca alors !\n' >"$T/p.tsv"
MT="--tsv $T/p.tsv --out $T/z.tfm --threads 1 --min-freq 1 --log-every 0 --d-model 8 --n-head 2 --n-layer 1 --ffn 8"
$TFM train-mt $MT --out "$T/mt.tfm" --epochs 1 --batch-size 2 2>/dev/null
LM="--data data/demo.txt --out $T/z.tfm --threads 1 --iters 1 --eval-iters 1"

# train-lm
# (since issue 33 the flags share the checkpoint loader's bounds: batch x block <= 2^28 is checked first)
expect_refused "train-lm --block-size 2147483647: batch x block bounded before anything is read" \
    "--batch-size \* --block-size must be <= 2\^28, got 12 \* 2147483647" $N $TFM train-lm $LM --block-size 2147483647
expect_refused "train-lm --batch-size 4096 --block-size 8192: the step's activations" \
    "--batch-size 4096 x --block-size 8192: one training step needs ~[0-9]+ GiB" $N \
    $TFM train-lm $LM --block-size 8192 --batch-size 4096 --val-frac 0.5
expect_refused "train-lm --n-embd 65536: the parameter count (vocab x n_embd, n_embd^2)" \
    "model config too large: [0-9]+ parameters \(n_layer 4, n_embd 65536" $N $TFM train-lm $LM --n-embd 65536 --n-head 1
[ ! -e "$T/z.tfm" ] && pass "train-lm: nothing written by the refused runs" || fail "train-lm: refused runs" "z.tfm written"

# train-mt
expect_refused "train-mt --batch-size 2147483647" "--batch-size must be in" $N $TFM train-mt $MT --batch-size 2147483647
expect_refused "train-mt --max-len 2147483647" "--max-len must be in" $N $TFM train-mt $MT --max-len 2147483647
expect_refused "train-mt --max-tokens 2147483647" "--max-tokens must be in 0..1e7" $N $TFM train-mt $MT --max-tokens 2147483647
expect_refused "train-mt --epochs 2147483647 (x 3 steps per epoch)" \
    "--epochs 2147483647 x 3 steps per epoch overflows the step counter" $N $TFM train-mt $MT --epochs 2147483647 --batch-size 2
expect_refused "train-mt --d-model 65536: the parameter count" "config describes [0-9]+ parameters, at most 2147483648" $N \
    $TFM train-mt $MT --d-model 65536 --n-head 1
awk 'BEGIN { for (i = 0; i < 1000; i++) { s = ""; for (j = 0; j < 2000; j++) s = s "w" (j % 50) " "; print s "\t" s } }' >"$T/long.tsv"
expect_refused "train-mt --batch-size 1000 x 2000-token pairs: the step's activations" \
    "--batch-size 1000 \(at worst 1000 pairs a batch of 2001 source / 2001 target tokens\), --max-len [0-9]+: one training step needs ~[0-9]+ GiB" $N \
    $TFM train-mt --tsv "$T/long.tsv" --out "$T/z.tfm" --threads 1 --log-every 0 --max-len 4096 --batch-size 1000 \
    --d-model 64 --n-head 4 --n-layer 1 --ffn 64
[ ! -e "$T/z.tfm" ] && pass "train-mt: nothing written by the refused runs" || fail "train-mt: refused runs" "z.tfm written"

# translate, attention
printf 'go .\n' >"$T/one.txt"
for f in beam batch-size max-output max-src threads; do
    expect_refused "translate --$f 2147483647" "--$f must be in" "$T/one.txt" $TFM translate "$T/mt.tfm" --$f 2147483647
done
yes "go ." | head -n 4096 >"$T/many.txt"
expect_refused "translate: 4096 sentences x --beam 64 x --max-output 4096: the batch's caches" \
    "decoding 4096 sentences x beam 64, .* needs ~[0-9]+ GiB, at most 8 GiB" "$T/many.txt" \
    $TFM translate "$T/mt.tfm" --beam 64 --batch-size 4096 --max-output 4096 --threads 1
expect_refused "attention --threads 2147483647" "--threads must be in" $N \
    $TFM attention "$T/mt.tfm" --text "go ." --out "$T/a.svg" --threads 2147483647
