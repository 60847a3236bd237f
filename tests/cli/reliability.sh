# Never lose a user's work (issue 11): clean stops on SIGINT/SIGTERM, mid-run checkpoints that resume
# bit-identically (train-lm and train-mt), repeated SIGKILL, a full disk, a read-only directory,
# non-finite losses, bounded flags, --out that is an input, stdout write errors.
source "$(dirname "$0")/lib.bash"
head -c 20000 data/demo.txt >"$TMP/s.txt"
LM="--n-layer 1 --n-head 2 --n-embd 16 --block-size 16 --batch-size 4 --eval-iters 2 --threads 2 --dropout 0.1"
FRA=../shared/data/fra-eng/fra.txt
MT="--tsv $FRA --num-examples 200 --max-len 10 --d-model 16 --n-layer 1 --n-head 2 --ffn 16 --batch-size 16 --epochs 2
    --threads 2 --dropout 0.1 --bucket 4 --seed 3 --log-every 1"

# wait_for FILE PATTERN: until the pattern shows in the file (at most ~30 s)
wait_for() { for _ in $(seq 300); do grep -q -- "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done; return 1; }
# the per-step losses "step N/..: loss X" of a log, from step $2 on
losses() { grep -o 'step [0-9]*/[0-9]* | loss [0-9.]*' "$1" | awk -v from="$2" '{split($2, a, "/"); if (a[1] + 0 >= from) print}'; }

# ---- train-lm: --save-every + --keep-last, resume from a mid-run copy == the uninterrupted run
# (the uninterrupted runs use the same checkpoint flags: they are part of the stored run configuration)
$TFM train-lm --data "$TMP/s.txt" --out "$TMP/a.tfm" $LM --iters 20 --eval-every 10 --log-every 1 --save-every 3 \
    --keep-last 2 2>"$TMP/a.err"
$TFM train-lm --data "$TMP/s.txt" --out "$TMP/b.tfm" $LM --iters 20 --eval-every 10 --save-every 3 --keep-last 2 \
    --max-steps 8 2>/dev/null
ls "$TMP" | grep -q '^b.step6.tfm$' && ls "$TMP" | grep -q '^b.step8.tfm$' && ! ls "$TMP" | grep -q '^b.step3.tfm$' \
    && pass "train-lm --keep-last 2 keeps step6 and step8 only" || fail "train-lm --keep-last" "$(ls "$TMP" | grep '^b\.')"
$TFM train-lm --data "$TMP/s.txt" --out "$TMP/c.tfm" --resume "$TMP/b.step6.tfm" --threads 2 --log-every 1 2>"$TMP/c.err"
cmp -s "$TMP/a.tfm" "$TMP/c.tfm" && pass "train-lm resume from --save-every step 6 is bit-identical" \
    || fail "train-lm --save-every resume" "checkpoints differ"
[ "$(losses "$TMP/a.err" 7)" = "$(losses "$TMP/c.err" 7)" ] && [ -n "$(losses "$TMP/c.err" 7)" ] \
    && pass "train-lm resumed losses == uninterrupted losses" || fail "train-lm resumed losses" "differ"

# ---- train-mt: a checkpoint inside epoch 1 (step 7 of 13) resumes bit-identically, same per-step losses
$TFM train-mt $MT --out "$TMP/m1.tfm" --save-every 5 2>"$TMP/m1.err"
$TFM train-mt $MT --out "$TMP/m2.tfm" --save-every 5 --max-steps 7 2>/dev/null
$TFM train-mt $MT --resume "$TMP/m2.tfm" 2>"$TMP/m2.err"
cmp -s "$TMP/m1.tfm" "$TMP/m2.tfm" && pass "train-mt resume from a mid-epoch checkpoint (step 7) is bit-identical" \
    || fail "train-mt mid-epoch resume" "checkpoints differ"
mtl() { grep -o 'step [0-9]*/[0-9]*  loss [0-9.]*' "$1" | awk -v from="$2" '{split($2, a, "/"); if (a[1] + 0 > from) print}'; }
[ -n "$(mtl "$TMP/m2.err" 7)" ] && [ "$(mtl "$TMP/m1.err" 7 | grep -v '^$')" = "$(mtl "$TMP/m2.err" 7)" ] \
    && pass "train-mt resumed per-step losses == uninterrupted" || fail "train-mt resumed losses" "differ"
$TFM train-mt $MT --out "$TMP/m3.tfm" --save-every 4 --keep-last 2 --max-steps 17 2>/dev/null
ls "$TMP" | grep -q '^m3.step16.tfm$' && ls "$TMP" | grep -q '^m3.step17.tfm$' && ! ls "$TMP" | grep -q '^m3.step12.tfm$' \
    && pass "train-mt --keep-last 2" || fail "train-mt --keep-last 2" "$(ls "$TMP" | grep '^m3\.')"
cp "$TMP/m3.step16.tfm" "$TMP/m4.tfm"
$TFM train-mt $MT --resume "$TMP/m4.tfm" --save-every 5 --keep-last 0 2>/dev/null
cmp -s "$TMP/m1.tfm" "$TMP/m4.tfm" && pass "train-mt resume from step 16 (epoch 2) copy is bit-identical" \
    || fail "train-mt epoch-2 resume" "checkpoints differ"

# ---- SIGINT: finishes the step, saves, says what and how to resume, exits 130; resume == uninterrupted
N=6000   # long enough (about 1 s) that the signal lands mid-run
$TFM train-lm --data "$TMP/s.txt" --out "$TMP/full.tfm" $LM --iters $N --eval-every 2000 --log-every 1 2>/dev/null
$TFM train-lm --data "$TMP/s.txt" --out "$TMP/int.tfm" $LM --iters $N --eval-every 2000 --log-every 1 2>"$TMP/int.err" &
pid=$!
wait_for "$TMP/int.err" "step 30/"; kill -INT $pid; wait $pid; rc=$?
[ $rc -eq 130 ] && grep -q "stopped by SIGINT: saved $TMP/int.tfm at step [0-9]*; resume with: tfm train-lm" "$TMP/int.err" \
    && pass "train-lm SIGINT: exit 130, names the checkpoint, step and resume command" \
    || fail "train-lm SIGINT" "exit $rc: $(tail -n 2 "$TMP/int.err")"
$TFM train-lm --data "$TMP/s.txt" --out "$TMP/int.tfm" --resume "$TMP/int.tfm" --threads 2 2>/dev/null
cmp -s "$TMP/full.tfm" "$TMP/int.tfm" && pass "train-lm after SIGINT: resume == uninterrupted run" \
    || fail "train-lm SIGINT resume" "checkpoints differ"

# ---- SIGTERM on train-mt mid-run: exit 143, a checkpoint, resume == uninterrupted
MTL="--tsv $FRA --num-examples 2000 --max-len 10 --d-model 16 --n-layer 1 --n-head 2 --ffn 16 --batch-size 16
     --epochs 6 --threads 2 --dropout 0.1 --seed 5 --log-every 1"
$TFM train-mt $MTL --out "$TMP/t1.tfm" 2>/dev/null
$TFM train-mt $MTL --out "$TMP/t2.tfm" 2>"$TMP/t2.err" &
pid=$!
wait_for "$TMP/t2.err" "step 20/"; kill -TERM $pid; wait $pid; rc=$?
# (the signal lands some steps after "step 20/" was seen, in the first epoch or a later one: 6 epochs leave room)
[ $rc -eq 143 ] && grep -q "stopped by SIGTERM: saved $TMP/t2.tfm at step [0-9]* (epoch [0-5])" "$TMP/t2.err" \
    && pass "train-mt SIGTERM mid-run: exit 143, checkpoint named" || fail "train-mt SIGTERM" "exit $rc: $(tail -n 2 "$TMP/t2.err")"
$TFM train-mt $MTL --resume "$TMP/t2.tfm" 2>/dev/null
cmp -s "$TMP/t1.tfm" "$TMP/t2.tfm" && pass "train-mt after SIGTERM: resume == uninterrupted run" \
    || fail "train-mt SIGTERM resume" "checkpoints differ"

# ---- a second SIGINT exits at once; the last checkpoint stays loadable
$TFM train-lm --data "$TMP/s.txt" --out "$TMP/two.tfm" $LM --iters 100000 --save-every 5 --log-every 1 2>"$TMP/two.err" &
pid=$!
wait_for "$TMP/two.err" "step 40/"; kill -INT $pid; kill -INT $pid; wait $pid; rc=$?
[ $rc -eq 130 ] && $TFM info "$TMP/two.tfm" >/dev/null 2>&1 && pass "double SIGINT: exit 130, checkpoint loadable" \
    || fail "double SIGINT" "exit $rc / info: $($TFM info "$TMP/two.tfm" 2>&1 | tail -n 1)"

# ---- a repeated SIGTERM (a batch system and mpirun may both send one) does not cut the save short
$TFM train-lm --data "$TMP/s.txt" --out "$TMP/tt.tfm" $LM --iters 100000 --log-every 1 2>"$TMP/tt.err" &
pid=$!
wait_for "$TMP/tt.err" "step 40/"; kill -TERM $pid; kill -TERM $pid 2>/dev/null; sleep 0.2; kill -TERM $pid 2>/dev/null; wait $pid; rc=$?
[ $rc -eq 143 ] && grep -q 'stopped by SIGTERM: saved' "$TMP/tt.err" && $TFM info "$TMP/tt.tfm" 2>/dev/null | grep -Eq '^ +iter +[1-9]' \
    && pass "SIGTERM three times: one clean stop, saved, exit 143" \
    || fail "repeated SIGTERM" "exit $rc: $(tail -n 1 "$TMP/tt.err")"

# ---- SIGKILL 20 times at random moments (a save every step): the checkpoint is always complete
ok=0; bad=""
for i in $(seq 20); do
    if [ -f "$TMP/k.tfm" ]; then args=(--resume "$TMP/k.tfm" --threads 2); else args=($LM); fi
    $TFM train-lm --data "$TMP/s.txt" --out "$TMP/k.tfm" "${args[@]}" --iters 100000 --eval-every 100000 --save-every 1 \
        2>/dev/null &
    pid=$!
    sleep "0.$((RANDOM % 9 + 1))$((RANDOM % 10))"
    kill -KILL $pid; wait $pid 2>/dev/null
    if [ ! -f "$TMP/k.tfm" ] || $TFM info "$TMP/k.tfm" >/dev/null 2>&1; then ok=$((ok + 1)); else bad="$bad $i"; fi
done
[ $ok -eq 20 ] && [ -f "$TMP/k.tfm" ] && pass "20 x SIGKILL: checkpoint always loadable (or not yet written)" \
    || fail "SIGKILL" "unloadable after kills:$bad"
ntmp=$(ls "$TMP" | grep -c '^k.tfm.tmp.' || true)
$TFM train-lm --data "$TMP/s.txt" --out "$TMP/k.tfm" --resume "$TMP/k.tfm" --threads 2 --max-steps 1 2>"$TMP/k.err"
left=$(ls "$TMP" | grep -c '^k.tfm.tmp.' || true)
[ "$left" -eq 0 ] && pass "stale k.tfm.tmp.<pid> files removed at start ($ntmp found)" || fail "stale tmp" "$left left"

# ---- disk full (a real tmpfs: room for one checkpoint, not for the temp file of the next)
mnt="$TMP/full"; mkdir -p "$mnt"
if mount -t tmpfs -o size=80k tmpfs "$mnt" 2>/dev/null; then
    $TFM train-lm --data "$TMP/s.txt" --out "$mnt/x.tfm" $LM --iters 50 --eval-every 100 --save-every 5 2>"$TMP/full.err"
    rc=$?
    it=$($TFM info "$mnt/x.tfm" 2>/dev/null | awk '$1 == "iter" {print $2}')
    [ $rc -eq 74 ] && grep -q "$mnt/x.tfm: save failed.*No space left on device" "$TMP/full.err" \
        && pass "ENOSPC: stops with path and reason, exit 74" || fail "ENOSPC message" "exit $rc: $(tail -n 1 "$TMP/full.err")"
    [ "$it" = 5 ] && ! ls "$mnt" | grep -q tmp && pass "ENOSPC: previous checkpoint (step 5) intact, no temp file" \
        || fail "ENOSPC old checkpoint" "iter '$it', files: $(ls "$mnt")"
    # read-only directory: refused before training starts
    mount -o remount,ro "$mnt"
    expect_exit "read-only dir: train-mt refuses --out at start" 74 "cannot write $mnt/y.tfm.*Read-only" \
        $TFM train-mt $MT --out "$mnt/y.tfm"
    umount "$mnt"
else
    skip "ENOSPC on tmpfs" "cannot mount a tmpfs (not root?)"
fi

# ---- non-finite: a huge lr diverges; the run stops naming the step, the last checkpoint has no NaN/Inf
# (lr 1e3: some steps are saved before the weights diverge; with 1e30 the first step's weights already fail
# the check before the save, and nothing is written)
$TFM train-lm --data "$TMP/s.txt" --out "$TMP/nan.tfm" $LM --iters 200 --lr 1e3 --min-lr 0 --warmup 0 --save-every 1 \
    2>"$TMP/nan.err"; rc=$?
[ $rc -eq 1 ] && grep -Eq "^tfm train-lm: step [0-9]+: .*(is not finite|the weights diverged \(not saved\)).*; the last good checkpoint: .*nan.tfm \(step [0-9]+\)$" "$TMP/nan.err" \
    && pass "divergence stops with the step named" || fail "divergence" "exit $rc: $(tail -n 1 "$TMP/nan.err")"
if /usr/bin/python3 -c 'import numpy' 2>/dev/null; then
    /usr/bin/python3 - "$TMP/nan.tfm" <<'EOF' && pass "last checkpoint after divergence: weights and moments finite" || fail "NaN in checkpoint" "see above"
import sys; sys.path.insert(0, "scripts"); import numpy as np, tfmio
e = tfmio.load(sys.argv[1])
bad = [k for k, v in e.items() if not k.startswith("train.") and isinstance(v, np.ndarray) and v.dtype.kind == "f" and not np.isfinite(v).all()]
print("non-finite:", bad) if bad else None; sys.exit(1 if bad else 0)
EOF
else
    skip "finite checkpoint" "no numpy in /usr/bin/python3"
fi
$TFM train-lm --data "$TMP/s.txt" --out "$TMP/nan2.tfm" $LM --iters 200 --lr 1e30 --min-lr 0 --warmup 0 \
    --skip-nonfinite 3 2>"$TMP/nan2.err"; rc=$?
[ $rc -eq 1 ] && [ "$(grep -c 'batch skipped' "$TMP/nan2.err")" -eq 3 ] && grep -q "4 such batches, --skip-nonfinite 3" "$TMP/nan2.err" \
    && pass "--skip-nonfinite 3 skips 3 batches, stops at the 4th" || fail "--skip-nonfinite" "exit $rc: $(tail -n 2 "$TMP/nan2.err")"

# ---- flags bounded, --out that is an input refused, stdout write errors reported
D="--data $TMP/s.txt --out $TMP/z.tfm"
expect_error "train-lm --log-every -1" "--log-every must be >= 0" $TFM train-lm $D --log-every -1
expect_error "train-lm --val-frac 1e-9" "corpus too short.*validation" $TFM train-lm $D --val-frac 1e-9
expect_error "train-lm --batch-size 2147483647" "--batch-size must be in" $TFM train-lm $D --batch-size 2147483647
expect_error "train-lm --threads 2147483647" "--threads must be in" $TFM train-lm $D --threads 2147483647
expect_error "train-lm --warmup 2147483647" "--warmup must be in" $TFM train-lm $D --warmup 2147483647
expect_error "train-mt --threads 2147483647" "--threads must be in" $TFM train-mt $MT --out "$TMP/z.tfm" --threads 2147483647
expect_error "train-mt --warmup 2147483647" "--warmup must be in" $TFM train-mt $MT --out "$TMP/z.tfm" --warmup 2147483647
expect_error "generate --tokens 2147483647" "--tokens must be in" $TFM generate "$TMP/a.tfm" --tokens 2147483647
cp "$TMP/s.txt" "$TMP/keep.txt"
expect_error "train-lm --out = --data refused" "is the input file" $TFM train-lm --data "$TMP/s.txt" --out "$TMP/s.txt"
head -n 50 $FRA >"$TMP/small.tsv"
expect_error "train-mt --out = --tsv refused" "is the input file" $TFM train-mt --tsv "$TMP/small.tsv" --out "$TMP/small.tsv"
ln -f "$TMP/m1.tfm" "$TMP/m1-link.tfm"
expect_error "attention --out = MODEL (hard link) refused" "is the input file" \
    $TFM attention "$TMP/m1.tfm" --text "go ." --out "$TMP/m1-link.tfm"
expect_error "train-lm --log-file = --data refused" "--log-file .* is the input file .*s.txt \(--data\)" \
    $TFM train-lm --data "$TMP/s.txt" --out "$TMP/z.tfm" --log-file "$TMP/s.txt"
cp "$TMP/m1.tfm" "$TMP/m1-keep.tfm"
expect_error "train-mt --log-file = --out refused" "--out .*m1.tfm and --log-file .*m1.tfm are the same file" \
    $TFM train-mt --tsv "$TMP/small.tsv" --out "$TMP/m1.tfm" --log-file "$TMP/m1.tfm"
cmp -s "$TMP/m1.tfm" "$TMP/m1-keep.tfm" && pass "checkpoint untouched after a refused --log-file" || fail "--log-file = --out" "checkpoint changed"
cmp -s "$TMP/s.txt" "$TMP/keep.txt" && pass "corpus untouched after the refused runs" || fail "corpus" "changed"
expect_error "train-mt --out in a missing dir: refused at start" "cannot write" $TFM train-mt $MT --out "$TMP/nodir/x.tfm"
for cmd in "info $TMP/a.tfm" "generate $TMP/a.tfm --tokens 5" "demo kernel-regression --out-dir $TMP"; do
    $TFM $cmd >/dev/full 2>"$TMP/err"; rc=$?
    [ $rc -ne 0 ] && grep -q "cannot write standard output" "$TMP/err" && pass "${cmd%% *} > /dev/full: exit $rc, reported" \
        || fail "${cmd%% *} > /dev/full" "exit $rc: $(tail -n 1 "$TMP/err")"
done
printf 'a b c\n' >"$TMP/h.txt"
$TFM bleu "$TMP/h.txt" "$TMP/h.txt" >/dev/full 2>"$TMP/err"; rc=$?
[ $rc -ne 0 ] && grep -q "cannot write standard output" "$TMP/err" && pass "bleu > /dev/full: reported" \
    || fail "bleu > /dev/full" "exit $rc: $(tail -n 1 "$TMP/err")"

# ---- a resume that cannot change the run: stored configuration, conflicting flags, other data
expect_error "train-lm --resume --lr: both values named" "--lr 0.01 differs from the checkpoint's --lr 0.001" \
    $TFM train-lm --resume "$TMP/b.step6.tfm" --out "$TMP/z.tfm" --lr 0.01
head -c 15000 "$TMP/s.txt" >"$TMP/s2.txt"
expect_error "train-lm --resume on other data refused" "--data .*s2.txt is not the data of the run \(15000 bytes" \
    $TFM train-lm --resume "$TMP/b.step6.tfm" --out "$TMP/z.tfm" --data "$TMP/s2.txt"
$TFM train-lm --resume "$TMP/b.step6.tfm" --out "$TMP/z.tfm" --data "$TMP/s2.txt" --allow-new-data 2>"$TMP/err"
[ $? -eq 0 ] && grep -q "allow-new-data: --data .*s2.txt (15000 bytes" "$TMP/err" \
    && pass "--allow-new-data resumes on other data and logs it" || fail "--allow-new-data" "$(tail -n 1 "$TMP/err")"
MQ="--tsv $FRA --num-examples 200 --max-len 12 --d-model 16 --n-layer 1 --n-head 2 --ffn 16 --batch-size 16 --epochs 2
    --threads 2 --dropout 0.1 --bucket 4 --seed 3 --schedule cosine --warmup 3 --preprocess moses-lower --lr 0.004"
$TFM train-mt $MQ --out "$TMP/q1.tfm" 2>/dev/null
$TFM train-mt $MQ --out "$TMP/q2.tfm" --max-steps 7 2>/dev/null
$TFM train-mt --resume "$TMP/q2.tfm" --threads 2 2>"$TMP/err"
cmp -s "$TMP/q1.tfm" "$TMP/q2.tfm" && grep -q "config: --tsv .* --preprocess moses-lower .*--schedule cosine" "$TMP/err" \
    && pass "train-mt --resume with no other flag: the stored run, bit-identical from mid-epoch" \
    || fail "train-mt resume without flags" "$(tail -n 2 "$TMP/err")"
expect_error "train-mt --resume --arch rnn: both values named" "--arch rnn differs from the checkpoint's --arch transformer" \
    $TFM train-mt --resume "$TMP/q2.tfm" --arch rnn --d-model 64
$TFM info "$TMP/q2.tfm" >"$TMP/out"
grep -q "run configuration" "$TMP/out" && grep -Eq "^  data:tsv +[0-9]+ bytes, fnv1a64 [0-9a-f]{16}" "$TMP/out" \
    && pass "info shows the run configuration and data fingerprint" || fail "info run config" "$(grep -A3 run "$TMP/out")"

# ---- train.* of a checkpoint range-checked on --resume (eval_every 0 divided by zero, grad_accum INT_MAX hung)
for edit in "train.eval_every=0" "train.grad_accum=2147483647" "train.lr=-1"; do
    /usr/bin/python3 - "$TMP/b.step6.tfm" "$TMP/edit.tfm" "$edit" <<'EOF2' 2>/dev/null || { skip "resume $edit" "no numpy"; continue; }
import sys; sys.path.insert(0, "scripts"); import numpy as np, tfmio
e = tfmio.load(sys.argv[1]); k, v = sys.argv[3].split("=")
e[k] = np.full_like(e[k], float(v) if e[k].dtype.kind == "f" else int(v)); tfmio.save(sys.argv[2], e)
EOF2
    expect_error "resume with $edit refused" "edit.tfm: train\.(eval_every|grad_accum|lr) must be" \
        $TFM train-lm --resume "$TMP/edit.tfm" --out "$TMP/z.tfm" --data "$TMP/s.txt"
done
