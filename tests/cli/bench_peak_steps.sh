#!/usr/bin/env bash
# bench/peak_steps.c (the GPT step's share of the FMA peak, step by step): it trains exactly as
# `tfm train-lm` (the same loss at the same step), counts a step's flops as bench/peak.sh does, prints every
# summary line, and rejects bad arguments with one line. Timing is not checked. Uses $TFM; the binary is
# built by `make test` beside it ($(BUILD)/bench/peak_steps).
source "$(dirname "$0")/lib.bash"
PS=$(dirname "$TFM")/bench/peak_steps
D=data/demo.txt
if [ ! -x "$PS" ]; then fail "peak_steps built" "$PS missing (make test builds it)"; exit 0; fi
if ! grep -q avx2 /proc/cpuinfo || ! grep -q fma /proc/cpuinfo; then skip "peak_steps" "the CPU has no AVX2+FMA"; exit 0; fi

"$PS" "$D" --steps 50 --threads 2 --probe-ms 0.5 >"$TMP/ps" 2>"$TMP/ps.err"
rc=$?
"$TFM" train-lm --data "$D" --out "$TMP/g.tfm" --iters 70 --seed 1337 --eval-every 1000 --eval-iters 1 --threads 2 \
    --log-every 1 2>"$TMP/lm.err" >/dev/null
want=$(sed -n 's/^step 70\/70 | loss \([0-9.]*\) .*/\1/p' "$TMP/lm.err")
got=$(sed -n 's/^loss at step 70: \([0-9.]*\) .*/\1/p' "$TMP/ps")
if [ "$rc" = 0 ] && [ -n "$want" ] && [ "$got" = "$want" ]; then
    pass "peak_steps trains as train-lm: loss $got at step 70 (20 warm-up + 50 timed)"
else
    fail "peak_steps trains as train-lm" "exit $rc, loss '$got' vs train-lm '$want': $(head -c 300 "$TMP/ps.err")"
fi

# flops a step: (6 x (layers x 12 width^2 + vocab x width) + 12 x layers x width x block) x batch x block
V=$(sed -n 's/.*vocab \([0-9]*\)).*/\1/p' "$TMP/ps")
flops=$(awk -v V="$V" 'BEGIN { printf "%.3f", (6 * (4 * 12 * 128 * 128 + V * 128) + 12 * 4 * 128 * 64) * 12 * 64 / 1e9 }')
if [ -n "$V" ] && grep -q "): $flops GFLOP per step, 2 threads, 50 steps after 20 of warm-up" "$TMP/ps"; then
    pass "peak_steps counts $flops GFLOP a step (vocab $V), as bench/peak.sh"
else
    fail "peak_steps flop count" "expected $flops for vocab '$V': $(head -n 1 "$TMP/ps")"
fi
if grep -Eq '^probes: best [0-9.]+ GFLOP/s, median ' "$TMP/ps" &&
   grep -Eq '^all steps: 50, median [0-9.]+ ms \(10% [0-9.]+, 90% [0-9.]+\) = [0-9.]+% of the best probe$' "$TMP/ps" &&
   grep -Eq '^quiet steps \(both probes around them >= 95% of the best\): ([0-9]+, median [0-9.]+ ms|none)' "$TMP/ps" &&
   grep -Eq '^median step after the lowest quarter of probes \([0-9]+-[0-9]+ GFLOP/s\): [0-9.]+ ms; after the highest \([0-9]+-[0-9]+\): [0-9.]+ ms$' "$TMP/ps"; then
    pass "peak_steps prints the probes, all steps, the quiet steps and the steps by probe quarter"
else
    fail "peak_steps summary lines" "$(head -c 600 "$TMP/ps")"
fi

expect_exit "peak_steps without DATA" 2 '^peak_steps: DATA \(a text file\) is required \(usage: ' "$PS"
expect_exit "peak_steps --steps 10" 2 '^peak_steps: a value out of range \(usage: ' "$PS" "$D" --steps 10
expect_exit "peak_steps --probe-ms 0" 2 '^peak_steps: a value out of range' "$PS" "$D" --probe-ms 0
expect_exit "peak_steps unknown flag" 2 '^peak_steps: unknown flag' "$PS" "$D" --iters 5
expect_exit "peak_steps flag without value" 2 '^peak_steps: a flag without its value' "$PS" "$D" --steps
expect_exit "peak_steps missing data" 1 "^peak_steps: .*$TMP/none.txt" "$PS" "$TMP/none.txt"
