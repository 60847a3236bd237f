# --parallel batch (thread data parallelism: one chunk of the batch per thread, replicas of the model, the
# gradients summed in chunk order) against --parallel ops (the threads split every op): the same training
# to float rounding, bit-identical between runs, with dropout, gradient accumulation, uneven chunks and
# --resume; the start-up line says which is used; a bad value is one line.
source "$(dirname "$0")/lib.bash"
head -c 20000 data/demo.txt >"$TMP/s.txt"
LM=(--data "$TMP/s.txt" --n-layer 2 --n-head 2 --n-embd 32 --block-size 16 --dropout 0.1 --iters 20 --eval-every 10
    --eval-iters 2 --log-every 1)
losses() { grep -o 'loss [0-9.]*' "$1" | awk '{print $2}'; }
# max |a - b| of two columns of numbers, "inf" if their lengths differ or are empty
maxdiff() { paste <(losses "$1") <(losses "$2") | awk -v n1="$(losses "$1" | wc -l)" -v n2="$(losses "$2" | wc -l)" \
    'BEGIN{m=0} {d=$1-$2; if (d<0) d=-d; if (d>m) m=d} END{if (n1!=n2 || n1==0) print "inf"; else printf "%.6f\n", m}'; }

run() { # name threads parallel [more flags]
    local n=$1 t=$2 p=$3; shift 3
    $TFM train-lm "${LM[@]}" --threads "$t" --parallel "$p" --out "$TMP/$n.tfm" "$@" 2>"$TMP/$n.err"
}
run b1 2 batch --batch-size 8 && run b2 2 batch --batch-size 8 && run o 2 ops --batch-size 8; rc=$?
if [ $rc -eq 0 ] && cmp -s "$TMP/b1.tfm" "$TMP/b2.tfm"; then
    pass "--parallel batch, 2 threads: two runs give the same checkpoint bytes"
else fail "--parallel batch determinism" "exit $rc or checkpoints differ"; fi
grep -q '; 2 threads, each a chunk of the batch (--parallel batch: 2 chunks)' "$TMP/b1.err" \
    && grep -q '; 2 threads splitting each op (--parallel ops)' "$TMP/o.err" \
    && pass "the start-up line names the parallelism" || fail "start-up line" "$(grep '^data' "$TMP/b1.err" "$TMP/o.err")"
d=$(maxdiff "$TMP/b1.err" "$TMP/o.err")
awk -v d="$d" 'BEGIN{exit !(d != "inf" && d < 2e-3)}' \
    && pass "--parallel batch == ops with dropout 0.1: 20 steps and 2 evaluations, max |loss diff| $d" \
    || fail "batch vs ops" "max |loss diff| $d"

# 3 threads, batch 4: chunks of 2, 1, 1 samples; gradient accumulation; against one thread
run u 3 batch --batch-size 4 --grad-accum 2 && run u1 1 ops --batch-size 4 --grad-accum 2; rc=$?
d=$(maxdiff "$TMP/u.err" "$TMP/u1.err")
[ $rc -eq 0 ] && grep -q '(--parallel batch: 3 chunks)' "$TMP/u.err" && awk -v d="$d" 'BEGIN{exit !(d != "inf" && d < 2e-3)}' \
    && pass "3 threads on batch 4 (chunks 2, 1, 1), --grad-accum 2 == one thread: max |loss diff| $d" \
    || fail "uneven chunks" "exit $rc, max |loss diff| $d"

# auto: batch with >= 2 threads and samples; a batch of 1 falls back to ops
run a 2 auto --batch-size 1 --iters 2; rc=$?
[ $rc -eq 0 ] && grep -q '2 threads splitting each op' "$TMP/a.err" && pass "--parallel auto with --batch-size 1: ops" \
    || fail "auto, batch 1" "exit $rc: $(grep '^data' "$TMP/a.err")"

# resume in batch mode: stopped at step 10 and resumed == the uninterrupted run (b1), byte for byte
run r 2 batch --batch-size 8 --max-steps 10 && $TFM train-lm --resume "$TMP/r.tfm" --threads 2 --parallel batch 2>/dev/null; rc=$?
[ $rc -eq 0 ] && cmp -s "$TMP/r.tfm" "$TMP/b1.tfm" && pass "--parallel batch: --max-steps 10 then --resume == uninterrupted" \
    || fail "batch resume" "exit $rc or checkpoints differ"

expect_exit "--parallel x: one line" 2 "^tfm train-lm: --parallel must be auto, batch or ops, got 'x'$" \
    $TFM train-lm --data "$TMP/s.txt" --out "$TMP/x.tfm" --parallel x

# ---- train-mt: the Transformer (dropout, label smoothing, token batches) and the GRU translator (d2l loss)
FRA=../shared/data/fra-eng/fra.txt
head -n 400 "$FRA" >"$TMP/p.tsv"
MTB=(--tsv "$TMP/p.tsv" --n-layer 1 --dropout 0.1 --label-smoothing 0.1 --epochs 2 --log-every 1 --max-tokens 160)
MT=("${MTB[@]}" --d-model 16 --n-head 2 --ffn 32)   # the Transformer's sizes (an rnn run leaves them out: MT=MTB)
mt() { local n=$1 t=$2 p=$3; shift 3; $TFM train-mt "${MT[@]}" --threads "$t" --parallel "$p" --out "$TMP/$n.tfm" "$@" 2>"$TMP/$n.err"; }
mt mb1 2 batch && mt mb2 2 batch && mt mo 2 ops; rc=$?
d=$(maxdiff "$TMP/mb1.err" "$TMP/mo.err")
[ $rc -eq 0 ] && cmp -s "$TMP/mb1.tfm" "$TMP/mb2.tfm" && grep -q '(--parallel batch: 2 chunks)' "$TMP/mb1.err" \
    && awk -v d="$d" 'BEGIN{exit !(d != "inf" && d < 2e-3)}' \
    && pass "train-mt --parallel batch: deterministic, == ops (dropout, label smoothing, --max-tokens): max |loss diff| $d" \
    || fail "train-mt batch vs ops" "exit $rc, max |loss diff| $d"
MT=("${MTB[@]}")
mt rb 3 batch --arch rnn --loss-norm d2l --batch-size 16 --max-tokens 0 && mt ro 1 ops --arch rnn --loss-norm d2l --batch-size 16 --max-tokens 0; rc=$?
MT=("${MTB[@]}" --d-model 16 --n-head 2 --ffn 32)
d=$(maxdiff "$TMP/rb.err" "$TMP/ro.err")
[ $rc -eq 0 ] && awk -v d="$d" 'BEGIN{exit !(d != "inf" && d < 2e-3)}' \
    && pass "train-mt --arch rnn --loss-norm d2l: 3 threads batch == 1 thread: max |loss diff| $d" \
    || fail "train-mt rnn batch vs 1 thread" "exit $rc, max |loss diff| $d"
expect_exit "train-mt --parallel x: one line" 2 "^tfm train-mt: --parallel must be auto, batch or ops, got 'x'$" \
    $TFM train-mt --tsv "$TMP/p.tsv" --out "$TMP/x.tfm" --parallel x
