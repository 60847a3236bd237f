#!/usr/bin/env bash
# The MPI layer (include/tfm/dist.h) under mpirun with 2 and 3 ranks: the all-reduce equals the serial
# rank-order sum bit for bit (bucket boundaries, the non-blocking form), broadcast, sums, slices; a
# configuration mismatch is one clear line; a rank that exits, is killed or hangs mid-run stops the
# others within seconds; only rank 0 writes. Builds `make MPI=1 BUILD=build-mpi mpi-check` (dist.c, util.c
# and the check program: seconds), then the trainers under mpirun: `tfm train-lm` and `tfm train-mt` on 2 ranks
# give the one-process loss at every step (1e-5 relative), identical parameters on every rank, --resume
# across 2 -> 1 and 1 -> 2 ranks continues the curve, only rank 0 writes, and the bad cases (batch not
# divisible, flags differing between ranks, a rank killed, SIGTERM to one rank) end cleanly.
# SKIP without mpirun / mpicc.
cd "$(dirname "$0")/../.."
source tests/cli/lib.bash
if ! command -v mpirun >/dev/null || ! command -v mpicc >/dev/null; then
    skip "mpi" "mpirun or mpicc (Open MPI: libopenmpi-dev openmpi-bin) not installed"; exit 0
fi
if ! make --no-print-directory -j2 MPI=1 BUILD=build-mpi mpi-check build-mpi/tfm >"$TMP/build.log" 2>&1; then
    fail "mpi build (make MPI=1)" "$(tail -n 3 "$TMP/build.log")"; exit 0
fi
pass "mpi build (make MPI=1 BUILD=build-mpi mpi-check build-mpi/tfm)"
CHECK=build-mpi/mpi/dist_check
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
run() { timeout 60 mpirun -np "$@"; }

# collectives: rank 0 prints the PASS/FAIL lines (each check is reduced over all ranks)
for np in 2 3; do
    run "$np" "$CHECK" collectives >"$TMP/coll" 2>"$TMP/coll.err"
    rc=$?
    sed "s/^\(PASS\|FAIL\) /\1 np=$np: /" "$TMP/coll"
    n=$(grep -c '^PASS' "$TMP/coll")
    if [ "$rc" -ne 0 ] || [ "$n" -lt 20 ]; then fail "collectives np=$np" "exit $rc, $n checks: $(tail -n 3 "$TMP/coll.err")"; fi
done

# configuration mismatch: exit non-zero, rank 0 names the differing rank in one line
run 3 "$CHECK" config --differ 2 >"$TMP/out" 2>"$TMP/err"
rc=$?
if [ "$rc" -ne 0 ] && [ "$(grep -c '^dist_check: configuration differs between ranks: rank 2 has hash' "$TMP/err")" -eq 1 ]; then
    pass "config mismatch on rank 2 of 3: one line naming rank 2"
else
    fail "config mismatch" "exit $rc: $(head -c 300 "$TMP/err")"
fi
if run 3 "$CHECK" config >"$TMP/out" 2>"$TMP/err" && grep -q 'config ok on 3 ranks' "$TMP/out"; then
    pass "config equal on 3 ranks"
else
    fail "config equal" "$(head -c 300 "$TMP/err")"
fi

# a rank that dies mid-run (after ~1 s of all-reduces): every rank is gone within seconds, exit non-zero,
# a message on stderr (mpirun's for exit/kill, the survivors' timeout line for a hang)
for how in exit kill hang; do
    t0=$(date +%s)
    run 3 "$CHECK" die --rank 1 --how "$how" --timeout 4 >"$TMP/out" 2>"$TMP/err"
    rc=$?; dt=$(( $(date +%s) - t0 ))
    case $how in
        exit) want='exited with non-zero status|returned a non-zero exit code';;
        kill) want='exited on signal 9';;
        hang) want='rank [02]: all-reduce: no answer from the other ranks for 4 s';;
    esac
    if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && [ "$dt" -le 20 ] && grep -Eq "$want" "$TMP/err"; then
        pass "rank 1 of 3 dies ($how): the others stop in ${dt} s with a message"
    else
        fail "rank dies ($how)" "exit $rc after ${dt} s: $(head -c 300 "$TMP/err")"
    fi
done

# only rank 0 writes
mkdir -p "$TMP/w"
run 3 "$CHECK" write "$TMP/w" >/dev/null 2>&1
if [ "$(ls "$TMP/w")" = "written.rank0" ]; then pass "only rank 0 writes"; else fail "only rank 0 writes" "files: $(ls "$TMP/w" | tr '\n' ' ')"; fi

# data-parallel GPT training in the shape of the wiring plan (tests/mpi/train_check.c: 20 steps, global
# batch 12, dropout 0.1): 1, 2 and 3 ranks give the single-process loss at every step within 1e-5
# relative; parameters stay identical on every rank (checked inside each step); the non-blocking
# all-reduce gives the same bits as the blocking one; without the dropout offset the curves differ.
TRAIN=build-mpi/mpi/train_check
# max relative difference of the "step S loss L" lines of two files (2 if the step lists differ)
maxrel() { awk 'NR==FNR { if ($1 == "step") a[$2] = $4; next }
                $1 == "step" { n++; if (!($2 in a)) { m = 2; next }
                               d = a[$2] - $4; if (d < 0) d = -d; r = d / ($4 < 0 ? -$4 : $4); if (r > m) m = r }
                END { if (n < 20) m = 2; printf "%.3g\n", m + 0 }' "$1" "$2"; }
export OMP_NUM_THREADS=1
if "$TRAIN" >"$TMP/t0" 2>"$TMP/t0.err"; then
    for np in 1 2 3; do
        if run "$np" -x OMP_NUM_THREADS=1 --bind-to none "$TRAIN" >"$TMP/t$np" 2>"$TMP/t$np.err"; then
            r=$(maxrel "$TMP/t0" "$TMP/t$np")
            if [ -n "$r" ] && awk -v r="$r" 'BEGIN { exit !(r <= 1e-5) }'; then
                pass "GPT training, $np rank(s) vs one process: loss at all 20 steps within 1e-5 (max rel $r)"
            else
                fail "GPT training np=$np" "max relative loss difference $r > 1e-5"
            fi
        else
            fail "GPT training np=$np" "exit $?: $(tail -n 2 "$TMP/t$np.err")"
        fi
    done
    run 2 -x OMP_NUM_THREADS=1 --bind-to none "$TRAIN" --overlap >"$TMP/t2o" 2>"$TMP/t2o.err"
    if cmp -s "$TMP/t2" "$TMP/t2o"; then pass "non-blocking all-reduce (per-tensor ranges): same losses and parameters, bit for bit"
    else fail "non-blocking all-reduce" "output differs from the blocking run: $(tail -n 2 "$TMP/t2o.err")"; fi
    run 2 -x OMP_NUM_THREADS=1 --bind-to none "$TRAIN" --no-drop-offset >"$TMP/t2n" 2>/dev/null
    r=$(maxrel "$TMP/t0" "$TMP/t2n")
    if [ -n "$r" ] && awk -v r="$r" 'BEGIN { exit !(r > 1e-5) }'; then pass "without the dropout offset 2 ranks drift from one process (max rel $r): the check can fail"
    else fail "dropout offset sensitivity" "max rel $r without the offset"; fi
    # mpirun -q: no banner of its own, so the one line on stderr is rank 0's
    expect_error "global batch 13 on 2 ranks: one line" '^train_check: --batch-size 13 is not divisible by the 2 ranks' \
        run 2 -q "$TRAIN" --batch 13
else
    fail "GPT training, one process" "$(tail -n 2 "$TMP/t0.err")"
fi

# without MPI=1 the library is the single-process version (rank 0 of 1): checked by tests/unit/test_dist.c

# ---------------------------------------------------------------- the trainers under mpirun
TFMM=$PWD/build-mpi/tfm   # without mpirun it is the one-process trainer (MPI is never initialised)
FRA=../shared/data/fra-eng/fra.txt
head -c 20000 data/demo.txt >"$TMP/small.txt"
# max relative difference of every "...loss..." value of log $2 against log $1 (--log-file JSON lines, matched
# by event, step and key; only events matching $4, default all); 2 if a value of $2 has no partner in $1 or fewer
# than $3 values were compared
jrel() { awk -v want="$3" -v ev="${4:-.}" '
    function parse(line, out,   n, i, f, kv) {
        split("", out); gsub(/[{}"]/, "", line); n = split(line, f, ", ")
        for (i = 1; i <= n; i++) { split(f[i], kv, ": "); out[kv[1]] = kv[2] }
    }
    NR == FNR { parse($0, r); for (k in r) if (k ~ /loss/) a[r["event"] " " r["step"] " " k] = r[k]; next }
    { parse($0, r)
      if (r["event"] !~ ev) next
      for (k in r) if (k ~ /loss/) {
          key = r["event"] " " r["step"] " " k; n++
          if (!(key in a) || r[k] == "null") { m = 2; continue }
          d = a[key] - r[k]; if (d < 0) d = -d; x = a[key] < 0 ? -a[key] : a[key]; if (x > 0 && d / x > m) m = d / x } }
    END { if (n < want) m = 2; printf "%.3g\n", m + 0 }' "$1" "$2"; }
# same_curve NAME WANT LOG_ONE LOG_OTHER [EVENTS [TOL]]: pass when every loss is within TOL (1e-5) relative
same_curve() {
    local r tol=${6:-1e-5}; r=$(jrel "$3" "$4" "$2" "${5:-.}")
    if awk -v r="$r" -v t="$tol" 'BEGIN { exit !(r <= t) }'; then pass "$1 (max rel $r)"; else fail "$1" "max relative loss difference $r > $tol"; fi
}
mrun() { timeout 120 mpirun -np "$@"; }

LM="--data $TMP/small.txt --n-layer 2 --n-head 2 --n-embd 32 --block-size 16 --batch-size 8 --iters 20 --eval-every 10
    --eval-iters 2 --dropout 0.1 --warmup 2 --threads 1 --log-every 1"
$TFMM train-lm $LM --out "$TMP/lm1.tfm" --log-file "$TMP/lm1.jsonl" 2>"$TMP/lm1.err" ||
    fail "train-lm one process" "$(tail -n 2 "$TMP/lm1.err")"
if mrun 2 --bind-to none $TFMM train-lm $LM --out "$TMP/lm2.tfm" --log-file "$TMP/lm2.jsonl" 2>"$TMP/lm2.err"; then
    same_curve "train-lm on 2 ranks: the one-process loss at all 20 steps and both evaluations" 24 "$TMP/lm1.jsonl" "$TMP/lm2.jsonl"
    grep -q '^2 ranks: parameters identical on every rank' "$TMP/lm2.err" && pass "train-lm on 2 ranks: parameters identical on both ranks" \
        || fail "train-lm parameters" "no 'parameters identical' line: $(tail -n 2 "$TMP/lm2.err")"
    [ "$(grep -c '^step 20: train loss' "$TMP/lm2.err")" -eq 1 ] && pass "train-lm on 2 ranks: one progress stream (rank 0's)" \
        || fail "train-lm progress" "$(grep -c '^step 20: train loss' "$TMP/lm2.err") copies of the last evaluation line"
else
    fail "train-lm on 2 ranks" "exit $?: $(tail -n 2 "$TMP/lm2.err")"
fi
# --resume with another number of ranks: 10 steps on 2 ranks + 10 on 1, and 10 on 1 + 10 on 2
mrun 2 --bind-to none $TFMM train-lm $LM --out "$TMP/r21.tfm" --max-steps 10 --log-file "$TMP/r21a.jsonl" 2>/dev/null
$TFMM train-lm --resume "$TMP/r21.tfm" --data "$TMP/small.txt" --threads 1 --log-every 1 --log-file "$TMP/r21b.jsonl" 2>/dev/null
cat "$TMP/r21a.jsonl" "$TMP/r21b.jsonl" >"$TMP/r21.jsonl" 2>/dev/null
same_curve "train-lm --resume of a 2-rank checkpoint on 1 rank continues the one-process curve" 24 "$TMP/lm1.jsonl" "$TMP/r21.jsonl"
$TFMM train-lm $LM --out "$TMP/r12.tfm" --max-steps 10 --log-file "$TMP/r12a.jsonl" 2>/dev/null
mrun 2 --bind-to none $TFMM train-lm --resume "$TMP/r12.tfm" --data "$TMP/small.txt" --threads 1 --log-every 1 --log-file "$TMP/r12b.jsonl" 2>/dev/null
cat "$TMP/r12a.jsonl" "$TMP/r12b.jsonl" >"$TMP/r12.jsonl" 2>/dev/null
same_curve "train-lm --resume of a 1-rank checkpoint on 2 ranks continues the one-process curve" 24 "$TMP/lm1.jsonl" "$TMP/r12.jsonl"

# train-mt: a small Transformer (dropout 0.2, the default) on 320 fra-eng pairs, 20 token-balanced batches,
# validation on 40 pairs every 10 steps (rank 0 validates; the others wait)
sed -n '2001,2040p' "$FRA" | cut -f1 >"$TMP/v.src"; sed -n '2001,2040p' "$FRA" | cut -f2 >"$TMP/v.tgt"
MT="--tsv $FRA --num-examples 320 --batch-size 16 --epochs 1 --d-model 32 --ffn 64 --n-layer 2 --threads 1 --log-every 1
    --valid-src $TMP/v.src --valid-tgt $TMP/v.tgt --eval-every 10"
# The Transformer's curves on 2 ranks and on 1 agree to float rounding only: the ranks' gradients are summed in
# another order, and this run (Noam warm-up, dropout 0.2) amplifies that from about step 15. Measured
# 2026-11-24 at commit f455075: the printed losses equal in all 6 digits at steps 1-14, then relative
# differences 1.4e-5, 3.9e-6, 7.5e-5, 9.6e-5, 1.5e-5, 1.15e-4 at steps 15-20 (the kernels before it
# happened to stay below 1e-5). Hence 5e-4 for these curves and 1e-3 for the validation losses.
MT_TOL=5e-4
$TFMM train-mt $MT --out "$TMP/mt1.tfm" --log-file "$TMP/mt1.jsonl" 2>"$TMP/mt1.err" ||
    fail "train-mt one process" "$(tail -n 2 "$TMP/mt1.err")"
if mrun 2 --bind-to none $TFMM train-mt $MT --out "$TMP/mt2.tfm" --log-file "$TMP/mt2.jsonl" 2>"$TMP/mt2.err"; then
    same_curve "train-mt on 2 ranks: the one-process loss at all 20 steps" 20 "$TMP/mt1.jsonl" "$TMP/mt2.jsonl" train $MT_TOL
    # rank 0 validates with its parameters, which differ from the one-process ones in the last bits (the
    # gradient is summed in another order, and Adam's early steps amplify that): close, not to 1e-5 (above)
    same_curve "train-mt on 2 ranks: the validation losses within 1e-3" 2 "$TMP/mt1.jsonl" "$TMP/mt2.jsonl" valid 1e-3
    grep -q '^2 ranks: parameters identical on every rank' "$TMP/mt2.err" && pass "train-mt on 2 ranks: parameters identical on both ranks" \
        || fail "train-mt parameters" "no 'parameters identical' line: $(tail -n 2 "$TMP/mt2.err")"
else
    fail "train-mt on 2 ranks" "exit $?: $(tail -n 2 "$TMP/mt2.err")"
fi
mrun 2 --bind-to none $TFMM train-mt $MT --out "$TMP/m21.tfm" --max-steps 10 --log-file "$TMP/m21a.jsonl" 2>/dev/null
$TFMM train-mt $MT --resume "$TMP/m21.tfm" --log-file "$TMP/m21b.jsonl" 2>/dev/null
cat "$TMP/m21a.jsonl" "$TMP/m21b.jsonl" >"$TMP/m21.jsonl" 2>/dev/null
same_curve "train-mt --resume of a 2-rank checkpoint (mid-epoch) on 1 rank continues the one-process curve" 20 "$TMP/mt1.jsonl" "$TMP/m21.jsonl" train $MT_TOL
$TFMM train-mt $MT --out "$TMP/m12.tfm" --max-steps 10 --log-file "$TMP/m12a.jsonl" 2>/dev/null
mrun 2 --bind-to none $TFMM train-mt $MT --resume "$TMP/m12.tfm" --log-file "$TMP/m12b.jsonl" 2>/dev/null
cat "$TMP/m12a.jsonl" "$TMP/m12b.jsonl" >"$TMP/m12.jsonl" 2>/dev/null
same_curve "train-mt --resume of a 1-rank checkpoint on 2 ranks continues the one-process curve" 20 "$TMP/mt1.jsonl" "$TMP/m12.jsonl" train $MT_TOL
# the GRU translators: their inter-layer dropout runs on time-major (T, B, H) tensors, keyed by global sample
# (tfm_dropout_time_major), so 2 ranks give the one-process curve with dropout too
for arch in rnn bahdanau; do
    R="--tsv $FRA --num-examples 320 --batch-size 16 --epochs 1 --arch $arch --embed-size 16 --hidden-size 16 --n-layer 2
       --dropout 0.2 --threads 1 --log-every 1"
    $TFMM train-mt $R --out "$TMP/${arch}1.tfm" --log-file "$TMP/${arch}1.jsonl" 2>/dev/null
    mrun 2 --bind-to none $TFMM train-mt $R --out "$TMP/${arch}2.tfm" --log-file "$TMP/${arch}2.jsonl" 2>/dev/null
    same_curve "train-mt --arch $arch (dropout 0.2) on 2 ranks: the one-process loss at all 20 steps" 20 \
        "$TMP/${arch}1.jsonl" "$TMP/${arch}2.jsonl" train
done

# ranks x threads: 2 ranks of 2 threads (--parallel batch inside each rank) cut the batch into the same 4 parts
# as one process of 4 threads, so the curves agree (train-lm: samples; train-mt: token-balanced pairs)
LM4=${LM/--threads 1/}
MT4=${MT/--threads 1/}
$TFMM train-lm $LM4 --threads 4 --out "$TMP/t41.tfm" --log-file "$TMP/t41.jsonl" 2>/dev/null
mrun 2 --bind-to none --oversubscribe $TFMM train-lm $LM4 --threads 2 --out "$TMP/t22.tfm" --log-file "$TMP/t22.jsonl" 2>/dev/null
same_curve "train-lm, 2 ranks x 2 threads (--parallel batch) == 1 process x 4 threads" 24 "$TMP/t41.jsonl" "$TMP/t22.jsonl"
$TFMM train-mt $MT4 --threads 4 --out "$TMP/u41.tfm" --log-file "$TMP/u41.jsonl" 2>/dev/null
mrun 2 --bind-to none --oversubscribe $TFMM train-mt $MT4 --threads 2 --out "$TMP/u22.tfm" --log-file "$TMP/u22.jsonl" 2>/dev/null
same_curve "train-mt, 2 ranks x 2 threads (--parallel batch) == 1 process x 4 threads" 20 "$TMP/u41.jsonl" "$TMP/u22.jsonl" train $MT_TOL

# only rank 0 writes: each rank runs in its own directory with relative paths; rank 1's stays as it was
for d in A B; do mkdir -p "$TMP/$d"; cp "$TMP/small.txt" "$TMP/v.src" "$TMP/v.tgt" "$TMP/$d/"; head -n 320 "$FRA" >"$TMP/$d/c.tsv"; done
W_LM="--data small.txt --n-layer 1 --n-head 2 --n-embd 16 --block-size 8 --batch-size 4 --iters 10 --eval-every 5 --eval-iters 1
      --threads 1 --save-every 3 --keep-last 2 --out o.tfm --log-file l.jsonl"
W_MT="--tsv c.tsv --batch-size 32 --epochs 1 --d-model 16 --ffn 32 --n-layer 1 --threads 1 --valid-src v.src --valid-tgt v.tgt
      --eval-every 5 --keep-best --save-every 3 --out m.tfm --log-file m.jsonl"
mrun 1 --wdir "$TMP/A" $TFMM train-lm $W_LM : -np 1 --wdir "$TMP/B" $TFMM train-lm $W_LM >/dev/null 2>"$TMP/w.err"; rc=$?
mrun 1 --wdir "$TMP/A" $TFMM train-mt $W_MT : -np 1 --wdir "$TMP/B" $TFMM train-mt $W_MT >/dev/null 2>>"$TMP/w.err"; rc=$((rc + $?))
a=$(cd "$TMP/A" && ls | tr '\n' ' '); b=$(cd "$TMP/B" && ls | tr '\n' ' ')
if [ "$rc" -eq 0 ] && [ "$b" = "c.tsv small.txt v.src v.tgt " ] && [ -s "$TMP/A/o.tfm" ] && [ -s "$TMP/A/m.best.tfm" ]; then
    pass "train-lm / train-mt on 2 ranks: only rank 0 writes (checkpoints, --keep-last, --keep-best, --log-file)"
else
    fail "only rank 0 writes" "exit $rc; rank 0 wrote: $a; rank 1's directory: $b; $(tail -n 2 "$TMP/w.err")"
fi

# bad input: one line from rank 0, non-zero exit
expect_error "train-lm --batch-size 9 on 2 ranks: one line" '^tfm train-lm: --batch-size 9 is not divisible by the 2 ranks' \
    mrun 2 -q $TFMM train-lm $LM --batch-size 9 --out "$TMP/x.tfm"
expect_error "train-lm with --lr differing between ranks: one line" '^tfm train-lm: configuration differs between ranks: rank 1 has hash' \
    mrun 1 -q $TFMM train-lm $LM --out "$TMP/x.tfm" : -np 1 $TFMM train-lm $LM --lr 2e-3 --out "$TMP/x.tfm"
expect_error "train-mt with other data on rank 2 of 3: one line" '^tfm train-mt: configuration differs between ranks: rank 2 has hash' \
    mrun 2 -q $TFMM train-mt $MT --out "$TMP/x.tfm" : -np 1 $TFMM train-mt $MT --num-examples 300 --out "$TMP/x.tfm"
[ ! -e "$TMP/x.tfm" ] && pass "a run refused at the start writes no checkpoint" || fail "refused run" "$TMP/x.tfm written"

# a rank that dies (SIGKILL) or hangs (SIGSTOP) mid-run: the others stop within seconds, with a message
LONG="--data $TMP/small.txt --n-layer 1 --n-head 2 --n-embd 16 --block-size 8 --batch-size 4 --iters 1000000 --eval-every 1000000
      --threads 1 --log-every 1000000"
for how in KILL STOP TERM; do
    rm -f "$TMP/pid1" "$TMP/k.tfm"
    t0=$(date +%s)
    TFM_DIST_TIMEOUT=3 timeout 60 mpirun -np 1 --bind-to none $TFMM train-lm $LONG --out "$TMP/k.tfm" \
        : -np 1 --bind-to none sh -c 'echo $$ >"$0"; exec "$@"' "$TMP/pid1" $TFMM train-lm $LONG --out "$TMP/k.tfm" \
        >/dev/null 2>"$TMP/k.err" &
    job=$!
    for _ in $(seq 100); do [ -s "$TMP/pid1" ] && break; sleep 0.1; done
    for _ in $(seq 300); do grep -q '^train-lm config:' "$TMP/k.err" 2>/dev/null && break; sleep 0.1; done   # training runs
    sleep 1.5
    [ -s "$TMP/pid1" ] && kill -"$how" "$(cat "$TMP/pid1")"
    wait "$job"; rc=$?; dt=$(( $(date +%s) - t0 ))
    [ "$how" = STOP ] && [ -s "$TMP/pid1" ] && kill -KILL "$(cat "$TMP/pid1")" 2>/dev/null
    case $how in
        KILL) want='exited on signal 9'; ok=$(( rc != 0 && rc != 124 ));;
        STOP) want='rank 0: (sum|all-reduce|barrier): no answer from the other ranks for 3 s'; ok=$(( rc != 0 && rc != 124 ));;
        TERM) want='^2 ranks: parameters identical'; ok=$(( rc == 0 )) ;;
    esac
    if [ "$ok" -eq 1 ] && [ "$dt" -le 30 ] && grep -Eq "$want" "$TMP/k.err"; then
        case $how in
            KILL) pass "rank 1 killed mid-run: rank 0 is stopped by mpirun in ${dt} s with a message";;
            STOP) pass "rank 1 hangs mid-run: rank 0 times out (TFM_DIST_TIMEOUT=3) and stops all in ${dt} s";;
            TERM) if $TFMM info "$TMP/k.tfm" 2>/dev/null | grep -Eq '^ +iter +[1-9]'; then
                      pass "SIGTERM to rank 1 only: every rank stops at the same step, rank 0 saves, exit 0 (${dt} s)"
                  else fail "SIGTERM to rank 1" "no checkpoint with a step: $(tail -n 2 "$TMP/k.err")"; fi;;
        esac
    else
        fail "rank 1 $how mid-run" "exit $rc after ${dt} s: $(tail -n 3 "$TMP/k.err" | head -c 400)"
    fi
done
# ---- issue 33: 3 ranks, a stuck (not dead) rank of 3, a kill of rank 0 during a save
LM3=${LM/--batch-size 8/--batch-size 12}
$TFMM train-lm $LM3 --out "$TMP/l31.tfm" --log-file "$TMP/l31.jsonl" 2>/dev/null
if mrun 3 --bind-to none $TFMM train-lm $LM3 --out "$TMP/l33.tfm" --log-file "$TMP/l33.jsonl" 2>"$TMP/l33.err"; then
    same_curve "train-lm on 3 ranks: the one-process loss at all 20 steps and both evaluations" 24 "$TMP/l31.jsonl" "$TMP/l33.jsonl"
    grep -q '^3 ranks: parameters identical on every rank' "$TMP/l33.err" && pass "train-lm on 3 ranks: parameters identical" \
        || fail "train-lm on 3 ranks" "no 'parameters identical' line: $(tail -n 2 "$TMP/l33.err")"
else
    fail "train-lm on 3 ranks" "exit $?: $(tail -n 2 "$TMP/l33.err")"
fi
# rank 2 of 3 stopped (SIGSTOP: alive, not answering): ranks 0 and 1 time out, every rank is gone within seconds,
# and the last checkpoint (--save-every 5) loads and resumes on one process
rm -f "$TMP/pid2" "$TMP/s.tfm"
t0=$(date +%s)
TFM_DIST_TIMEOUT=3 timeout 60 mpirun -np 2 --bind-to none $TFMM train-lm $LONG --batch-size 6 --save-every 5 --out "$TMP/s.tfm" \
    : -np 1 --bind-to none sh -c 'echo $$ >"$0"; exec "$@"' "$TMP/pid2" $TFMM train-lm $LONG --batch-size 6 --save-every 5 \
    --out "$TMP/s.tfm" >/dev/null 2>"$TMP/s.err" &
job=$!
for _ in $(seq 300); do grep -q '^train-lm config:' "$TMP/s.err" 2>/dev/null && [ -s "$TMP/pid2" ] && break; sleep 0.1; done
sleep 1.5
kill -STOP "$(cat "$TMP/pid2")"
wait "$job"; rc=$?; dt=$(( $(date +%s) - t0 ))
kill -KILL "$(cat "$TMP/pid2")" 2>/dev/null
it=$($TFMM info "$TMP/s.tfm" 2>/dev/null | awk '$1 == "iter" { print $2; exit }')
if [ $rc -ne 0 ] && [ $rc -ne 124 ] && [ $dt -le 40 ] && grep -Eq 'no answer from the other ranks for 3 s' "$TMP/s.err" &&
    [ -n "$it" ] && $TFMM train-lm --resume "$TMP/s.tfm" --threads 1 --max-steps $((it + 2)) >/dev/null 2>&1; then
    pass "rank 2 of 3 stuck (SIGSTOP): the others time out, all stop in ${dt} s; the last checkpoint resumes on one process"
else
    fail "rank 2 of 3 stuck" "exit $rc after ${dt} s: $(tail -n 2 "$TMP/s.err" | head -c 300)"
fi
# rank 0 of 3 killed (SIGKILL) while it saves (a 4-layer model saved every step, so most of the time goes to
# saves): mpirun ends the job, the checkpoint is the previous complete one, the killed save's temp file is removed
# by the next run
BIG="--data $TMP/small.txt --n-layer 4 --n-head 4 --n-embd 128 --block-size 8 --batch-size 3 --iters 1000000
     --eval-every 1000000 --threads 1 --log-every 1000000 --save-every 1"
mid=0; ok=1; why=""; n=0
for attempt in 1 2 3 4 5 6 7 8; do   # until two kills landed during a save (a temp file left), at most 8
    n=$attempt
    rm -f "$TMP/pid0"
    # each attempt a new run over the last one's checkpoint (--overwrite)
    timeout 60 mpirun -np 1 --bind-to none sh -c 'echo $$ >"$0"; exec "$@"' "$TMP/pid0" $TFMM train-lm $BIG --out "$TMP/k3.tfm" \
        --overwrite : -np 2 --bind-to none $TFMM train-lm $BIG --out "$TMP/k3.tfm" --overwrite >/dev/null 2>"$TMP/k3.err" &
    job=$!
    for _ in $(seq 300); do grep -q '^train-lm config:' "$TMP/k3.err" 2>/dev/null && [ -s "$TMP/k3.tfm" ] && break; sleep 0.1; done
    sleep "0.$((RANDOM % 9 + 1))"
    # then wait (builtin test, no fork) until rank 0's own save file OUT.tmp.<pid> exists, so the kill lands
    # during a save whatever the disk's speed (random timing alone missed 8 times of 8 on a CI machine)
    p0=$(cat "$TMP/pid0"); t=$((SECONDS + 10))
    until [ -e "$TMP/k3.tfm.tmp.$p0" ] || [ $SECONDS -gt $t ]; do :; done
    kill -KILL "$p0"; wait "$job"; rc=$?
    [ -e "$TMP/k3.tfm.tmp.$p0" ] && mid=$((mid + 1))
    [ $rc -ne 0 ] && [ $rc -ne 124 ] && $TFMM info "$TMP/k3.tfm" >/dev/null 2>&1 || { ok=0; why="$why attempt $attempt: exit $rc;"; }
    [ $mid -ge 2 ] && break
done
it=$($TFMM info "$TMP/k3.tfm" 2>/dev/null | awk '$1 == "iter" { print $2; exit }')
$TFMM train-lm --resume "$TMP/k3.tfm" --threads 1 --max-steps $((${it:-0} + 1)) >/dev/null 2>"$TMP/k3r.err"
left=$(ls "$TMP" | grep -c '^k3.tfm.tmp\.' || true)
if [ $ok -eq 1 ] && [ "$left" -eq 0 ] && [ $mid -ge 1 ]; then
    pass "rank 0 of 3 killed $n times ($mid during a save): the job ends, the checkpoint loads, the stale temp file is removed"
else
    fail "rank 0 of 3 killed during a save" "$why $mid kills during a save (need 1), $left temp files left"
fi

# SIGTERM to mpirun (what Ctrl-C / a batch system does). Measured with strace (Open MPI 4.1): mpirun sends
# SIGCONT, waits odls_base_sigkill_timeout (default 1 s), sends SIGTERM, waits as long again, then SIGKILL.
# The test gives the ranks 5 s so rank 0's fsynced save fits on a loaded machine, and signals mpirun itself:
# `timeout`, signalled, signals its whole process group too, so mpirun got SIGTERM twice, took the second
# as "abort now" and killed the ranks before rank 0 saved (the CI failure). Each rank's stderr goes to its
# own file, and the signal is sent once training runs (the handler is installed right after the config line).
rm -f "$TMP/k.tfm" "$TMP"/k.rank.*
timeout 60 mpirun -np 2 --bind-to none --mca odls_base_sigkill_timeout 5 \
    sh -c 'exec "$@" 2>"$0.$OMPI_COMM_WORLD_RANK"' "$TMP/k.rank" \
    $TFMM train-lm $LONG --out "$TMP/k.tfm" >/dev/null 2>"$TMP/k.err" &
job=$!
for _ in $(seq 300); do grep -q '^train-lm config:' "$TMP/k.rank.0" 2>/dev/null && break; sleep 0.1; done
sleep 1
kill -TERM "$(pgrep -P "$job" -x mpirun)"; wait "$job"
if grep -q 'stopped by SIGTERM: saved' "$TMP/k.rank.0" && $TFMM info "$TMP/k.tfm" 2>/dev/null | grep -Eq '^ +iter +[1-9]'; then
    pass "SIGTERM to mpirun: the ranks stop together and rank 0 saves the checkpoint"
else
    fail "SIGTERM to mpirun" "rank 0: $(tail -n 2 "$TMP/k.rank.0" 2>/dev/null | head -c 300); mpirun: $(tail -n 2 "$TMP/k.err" | head -c 200)"
fi

# the benchmark script (1 rank x 2 threads vs 2 ranks x 1 thread) runs: 2 steps of tiny models, numbers unused
if bash bench/dist.sh --smoke >"$TMP/b.out" 2>"$TMP/b.err" && [ "$(grep -Ec 'it/s .* compute .* allreduce .* wait' "$TMP/b.out")" -eq 4 ]; then
    pass "bench/dist.sh --smoke: it/s and the compute / allreduce / wait split for GPT and MT, 1x2 and 2x1"
else
    fail "bench/dist.sh --smoke" "$(tail -n 3 "$TMP/b.err" "$TMP/b.out" | head -c 400)"
fi
