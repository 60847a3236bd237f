# tfm demo: kernel regression prints the per-epoch loss and both test errors and writes two SVGs.
source "$(dirname "$0")/lib.bash"
expect_ok "demo kernel-regression runs" "$TFM" demo kernel-regression --out-dir "$TMP" --seed 1
out=$(cat "$TMP/out")
if [ "$(grep -c '^epoch [1-5], loss ' <<<"$out")" -eq 5 ]; then pass "demo kernel-regression prints 5 epoch losses"; else fail "demo kernel-regression prints 5 epoch losses" "$out"; fi
np=$(sed -n 's/^non-parametric.*test MSE vs truth \([0-9.]*\)$/\1/p' <<<"$out")
pa=$(sed -n 's/^parametric.*test MSE vs truth \([0-9.]*\)$/\1/p' <<<"$out")
if [ -n "$np" ] && [ -n "$pa" ] && awk -v a="$pa" -v b="$np" 'BEGIN{exit !(a < b)}'; then
    pass "demo kernel-regression parametric error < non-parametric"
else fail "demo kernel-regression parametric error < non-parametric" "parametric '$pa' non-parametric '$np'"; fi
for f in kernel_regression_fit kernel_regression_attention; do
    if [ -s "$TMP/$f.svg" ] && head -c 200 "$TMP/$f.svg" | grep -q '<svg'; then pass "demo writes $f.svg"; else fail "demo writes $f.svg" "missing or not SVG"; fi
done
expect_error "demo unknown name" "unknown demo" "$TFM" demo nope
expect_ok "demo kernel-regression creates a missing --out-dir" "$TFM" demo kernel-regression --out-dir "$TMP/new/sub" --epochs 1
if [ -s "$TMP/new/sub/kernel_regression_fit.svg" ]; then pass "demo writes into the created --out-dir"; else fail "demo writes into the created --out-dir" "no SVG in $TMP/new/sub"; fi
: >"$TMP/file"
expect_exit "demo kernel-regression --out-dir under a file" 74 "not a directory" "$TFM" demo kernel-regression --out-dir "$TMP/file/sub"
expect_error "demo kernel-regression bad --threads" "threads must be in 0\.\.1024" "$TFM" demo kernel-regression --threads -1
