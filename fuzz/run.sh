#!/usr/bin/env bash
# Runs every fuzz target for SECONDS each on a fresh generated seed corpus plus the kept corpus.
#   fuzz/run.sh BUILD_DIR SECONDS TARGET...
# Prints one line per target: executions, coverage (cov = edges, ft = features), corpus size, and
# "PASS fuzz/<target>" or "FAIL fuzz/<target>: <crash file>" (tests/run.sh counts those lines).
# A crash/leak/timeout input is left in BUILD_DIR/fuzz/artifacts/ (keep it in tests/fixtures/fuzz/).
set -u
build=$1; secs=$2; shift 2
cd "$(dirname "$0")/.."
work=$build/fuzz
rm -rf "$work/seeds"; mkdir -p "$work/seeds" "$work/artifacts"
"$work/make_seeds" "$work/seeds" || { echo "FAIL fuzz/seeds: make_seeds failed"; exit 1; }
export ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=0 UBSAN_OPTIONS=print_stacktrace=1
rc=0
for t in "$@"; do
    corpus=$work/corpus/$t
    mkdir -p "$corpus" "$work/seeds/$t"
    # reproducers of past findings are seeds too
    for f in tests/fixtures/fuzz/"$t"-*; do [ -f "$f" ] && cp "$f" "$work/seeds/$t/"; done
    log=$work/$t.log
    "$work/fuzz_$t" "$corpus" "$work/seeds/$t" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
        -max_len=65536 -print_final_stats=1 -artifact_prefix="$work/artifacts/$t-" >"$log" 2>&1
    r=$?
    execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$')
    cov=$(grep -E '^#[0-9]+' "$log" | tail -n 1 | grep -oE 'cov: [0-9]+ ft: [0-9]+ corp: [0-9]+' )
    printf '# fuzz/%-12s %10s execs in %ss  %s\n' "$t" "${execs:-?}" "$secs" "${cov:-?}"
    if [ "$r" -ne 0 ]; then
        art=$(grep -oE "$work/artifacts/$t-[a-z]+-[0-9a-f]+" "$log" | tail -n 1)
        # the input itself, so a failure seen only in a CI log can be reproduced (small inputs)
        b64=$([ -f "${art:-}" ] && [ "$(stat -c %s "$art")" -le 768 ] && base64 -w0 "$art")
        echo "FAIL fuzz/$t: exit $r, input ${art:-?} (log $log)${b64:+ base64 $b64}"
        grep -E 'ERROR|runtime error|SUMMARY' "$log" | head -n 3 | sed 's/^/#   /'
        rc=1
    else
        echo "PASS fuzz/$t"
    fi
done
exit $rc
