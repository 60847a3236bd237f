# The default build is portable (baseline x86-64; AVX2/AVX-512 kernels chosen at run time): it runs under
# qemu-x86_64 as a Zen 3 (EPYC-Milan: AVX2, no AVX-512) and as a baseline x86-64 CPU (qemu64: no AVX at
# all) and gives there the same bits as natively on the same path; TFM_ISA=generic, avx2 and avx512 agree to float
# tolerance; TFM_ISA names a path this CPU lacks -> one-line error.
source "$(dirname "$0")/lib.bash"
head -c 20000 data/demo.txt >"$TMP/small.txt"
ARGS=(--data "$TMP/small.txt" --n-layer 1 --n-head 2 --n-embd 32 --block-size 16 --batch-size 4 --iters 8
      --eval-every 8 --eval-iters 2 --threads 2)
has_avx2=0; grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo && has_avx2=1
has_avx512=0; grep -qw avx512f /proc/cpuinfo && has_avx512=1

# train natively on a path: train ISA NAME -> $TMP/NAME.tfm, $TMP/NAME.err
train() {
    TFM_ISA=$1 $TFM train-lm "${ARGS[@]}" --out "$TMP/$2.tfm" >/dev/null 2>"$TMP/$2.err"
}
val_loss() { sed -n 's/.*val loss \([0-9.]*\).*/\1/p' "$1" | tail -n 1; }
# same_loss A B: the runs A and B (trained above) end at the same validation loss to float tolerance
same_loss() {
    local a b; a=$(val_loss "$TMP/$1.err"); b=$(val_loss "$TMP/$2.err")
    if [ -n "$a" ] && [ -n "$b" ] && awk -v a="$a" -v b="$b" 'BEGIN { d = a - b; exit !(d < 2e-4 && d > -2e-4) }'; then
        pass "TFM_ISA=$1 and $2 give the same validation loss to float tolerance ($a vs $b)"
    else
        fail "$1 vs $2 validation loss" "'$a' vs '$b'"
    fi
}

train generic generic || fail "train-lm TFM_ISA=generic" "$(tail -n 2 "$TMP/generic.err")"
grep -q "gemm portable" "$TMP/generic.err" && pass "TFM_ISA=generic runs the portable kernels" \
    || fail "TFM_ISA=generic" "$(grep gemm "$TMP/generic.err")"
if [ $has_avx2 = 1 ]; then
    train avx2 avx2 || fail "train-lm TFM_ISA=avx2" "$(tail -n 2 "$TMP/avx2.err")"
    same_loss generic avx2
else
    skip "TFM_ISA=avx2" "this CPU lacks AVX2+FMA (the avx2 path is not tested here)"
fi
if [ $has_avx512 = 1 ]; then
    # The GEMM tiles give the same bits on both paths (test_gemm); the 16-lane vector math (softmax sums,
    # LayerNorm moments) rounds differently from the 8-lane one, so the weights agree to float tolerance.
    train avx512 avx512 || fail "train-lm TFM_ISA=avx512" "$(tail -n 2 "$TMP/avx512.err")"
    same_loss avx512 avx2
else
    expect_error "TFM_ISA=avx512 on a CPU without it: one-line error" "TFM_ISA=avx512" \
        env TFM_ISA=avx512 $TFM train-lm "${ARGS[@]}" --out "$TMP/no.tfm"
fi
expect_error "TFM_ISA unknown value: one-line error" "TFM_ISA=sse9: unknown" env TFM_ISA=sse9 $TFM info "$TMP/generic.tfm"
$TFM info "$TMP/generic.tfm" >"$TMP/info.out" 2>&1
grep -Eq "^kernels here: (avx512|avx2|generic) " "$TMP/info.out" && pass "tfm info names the kernel path in use" \
    || fail "tfm info kernel path" "$(tail -n 2 "$TMP/info.out")"

if ! command -v qemu-x86_64 >/dev/null; then
    skip "portable binary under qemu" "qemu-x86_64 is not installed (Debian package qemu-user)"
    exit 0
fi
# GOMP_SPINCOUNT set: tfm does not re-execute itself for the short spin (tfm_threads_short_spin), which
# under qemu-user would run the new image natively, outside the emulated CPU.
export GOMP_SPINCOUNT=$(sed -n 's/^#define TFM_SPINCOUNT "\([0-9]*\)"/\1/p' include/tfm/core.h)
# run under an emulated CPU: qemu_run CPU ISA NAME (TFM_ISA unset: the binary picks the path itself)
qemu_run() {
    qemu-x86_64 -cpu "$1" "$TFM" train-lm "${ARGS[@]}" --out "$TMP/$3.tfm" >/dev/null 2>"$TMP/$3.raw"
    local rc=$?
    grep -v '^qemu-x86_64: warning' "$TMP/$3.raw" >"$TMP/$3.err"
    return $rc
}
if qemu_run qemu64 generic q64 && grep -q "gemm portable" "$TMP/q64.err"; then
    cmp -s "$TMP/generic.tfm" "$TMP/q64.tfm" \
        && pass "runs on a baseline x86-64 CPU (qemu64, no AVX): portable path, same weights as TFM_ISA=generic here" \
        || fail "qemu64 run" "weights differ from the native generic run"
else
    fail "runs on a baseline x86-64 CPU (qemu64)" "exit/path: $(tail -n 2 "$TMP/q64.err")"
fi
if qemu_run EPYC-Milan avx2 milan && grep -q "gemm avx2-fma" "$TMP/milan.err"; then
    if [ $has_avx2 = 1 ]; then
        cmp -s "$TMP/avx2.tfm" "$TMP/milan.tfm" \
            && pass "runs on a Zen 3 (qemu EPYC-Milan, no AVX-512): AVX2 path, same weights as TFM_ISA=avx2 here" \
            || fail "EPYC-Milan run" "weights differ from the native avx2 run"
    else
        pass "runs on a Zen 3 (qemu EPYC-Milan, no AVX-512): AVX2 path"
    fi
    qemu-x86_64 -cpu EPYC-Milan "$TFM" generate "$TMP/milan.tfm" --prompt "RO" --tokens 30 --temperature 0 \
        --threads 2 >"$TMP/gen_q.txt" 2>/dev/null
    TFM_ISA=$([ $has_avx2 = 1 ] && echo avx2 || echo generic) $TFM generate "$TMP/milan.tfm" --prompt "RO" \
        --tokens 30 --temperature 0 --threads 2 >"$TMP/gen_n.txt" 2>/dev/null
    [ -s "$TMP/gen_q.txt" ] && cmp -s "$TMP/gen_q.txt" "$TMP/gen_n.txt" \
        && pass "generate under EPYC-Milan gives the native text" || fail "generate under EPYC-Milan" \
        "'$(head -c 80 "$TMP/gen_q.txt")' vs '$(head -c 80 "$TMP/gen_n.txt")'"
else
    fail "runs on a Zen 3 (qemu EPYC-Milan)" "exit/path: $(tail -n 2 "$TMP/milan.err")"
fi
