#!/usr/bin/env bash
# Runs every test and prints "N passed, N failed" as the last line.
#   tests/run.sh BUILD_DIR [SAN_BUILD_DIR]
# Unit test binaries print "PASS name" / "FAIL name: why" lines; CLI tests (tests/cli/*.sh) do the same.
# A test that needs an optional tool (spm_train, mpirun, qemu-x86_64) prints "SKIP name: why" where it is missing;
# a check this CPU or build cannot run (an AVX-512 kernel path on an AVX2 CPU, a huge allocation under ASan)
# prints "NOTRUN name: why" (reported in a note, not counted).
set -u
build=${1:-build}
san=${2:-}
cd "$(dirname "$0")/.."
export TFM="$PWD/$build/tfm"
pass=0; fail=0; skip=0; notrun=0
log=$(mktemp); failures=$(mktemp); trap 'rm -f "$log" "$failures"' EXIT
run_one() {  # label, command...
    local label=$1; shift
    "$@" >"$log" 2>&1
    local rc=$?
    local p f
    p=$(grep -c '^PASS ' "$log"); f=$(grep -c '^FAIL ' "$log"); s=$(grep -c '^SKIP ' "$log")
    notrun=$((notrun + $(grep -c '^NOTRUN ' "$log")))
    grep -E '^(FAIL|SKIP) ' "$log" | sed "s|^|[$label] |"
    grep -E '^FAIL ' "$log" | sed "s|^|[$label] |" >>"$failures"
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
        { echo "FAIL [$label] exited $rc without a FAIL line:"; tail -n 5 "$log"; } | tee -a "$failures"; f=1
    fi
    printf '%-40s %4d passed %3d failed %3d skipped\n' "$label" "$p" "$f" "$s"
    pass=$((pass + p)); fail=$((fail + f)); skip=$((skip + s))
}
for t in "$build"/tests/test_*; do
    [ -x "$t" ] || continue
    run_one "$(basename "$t")" "$t"
done
# The kernels' other instruction-set paths (src/ops/isa.c): the unit tests again with TFM_ISA forced to each
# path this CPU runs besides the default (its best one, used above). A path it lacks is skipped, not tested.
cpu_has() { grep -qw "$1" /proc/cpuinfo 2>/dev/null; }
isa_ok() { case $1 in avx512) cpu_has avx512f;; avx2) cpu_has avx2 && cpu_has fma;; *) true;; esac; }
best=generic; isa_ok avx2 && best=avx2; isa_ok avx512 && best=avx512
for isa in avx512 avx2 generic; do
    [ "$isa" = "$best" ] && continue
    if ! isa_ok "$isa"; then
        run_one "isa/$isa" echo "NOTRUN isa-$isa: this CPU lacks it (the $isa path is not tested here)"
        continue
    fi
    for t in "$build"/tests/test_*; do
        [ -x "$t" ] || continue
        case "$(basename "$t")" in test_recipe_*|test_speed) continue;; esac  # slow / timing only
        run_one "isa/$isa/$(basename "$t")" env TFM_ISA=$isa "$t"
    done
done
for t in tests/cli/*.sh; do
    [ -f "$t" ] || continue
    run_one "cli/$(basename "$t" .sh)" bash "$t"
done
# The same code must build warning-free with clang (-Wall -Wextra -Werror).
if command -v clang >/dev/null; then
    run_one "build/clang" bash -c 'make --no-print-directory -j2 BUILD=build-clang CC=clang all unit bench-bin >/dev/null \
        && echo "PASS clang build clean (-Wall -Wextra -Werror)"'
fi
# A short fuzzing run (issue 11): every target in fuzz/ for FUZZ_SECONDS (default 4) on its seed corpus.
if printf 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { (void)d; (void)n; return 0; }\n' \
        | clang -x c - -fsanitize=fuzzer -o /dev/null 2>/dev/null; then
    run_one "fuzz (${FUZZ_SECONDS:-4}s per target)" \
        make --no-print-directory -s fuzz FUZZ_SECONDS="${FUZZ_SECONDS:-4}"
else
    echo "SKIP fuzz: clang with libFuzzer (libclang-rt-dev) not available"; skip=$((skip + 1))
fi
if [ -n "$san" ]; then
    run_one "build/asan" bash -c "make --no-print-directory -j2 BUILD=$san SAN=1 unit >/dev/null \
        && echo 'PASS sanitizer build (ASan+UBSan)'"
    export ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1
    for t in "$san"/tests/test_*; do
        [ -x "$t" ] || continue
        case "$(basename "$t")" in test_parity_*|test_recipe_*) continue;; esac  # slow under ASan; covered above
        run_one "asan/$(basename "$t")" "$t"
    done
    # The CLI's error paths under ASan+UBSan (issue 33): the refusal-heavy CLI tests with the sanitizer build of tfm.
    # Every report goes to a file (log_path), also of commands whose stderr a test discards; any report, a leak
    # included, is a failure.
    if make --no-print-directory -j2 BUILD="$san" SAN=1 "$san/tfm" >/dev/null 2>&1; then
        reports=$(mktemp -d)
        for t in outputs mt_errors lm; do
            run_one "asan/cli/$t" env TFM="$PWD/$san/tfm" ASAN_OPTIONS="detect_leaks=1:log_path=$reports/asan" \
                UBSAN_OPTIONS="print_stacktrace=1:log_path=$reports/ubsan" bash "tests/cli/$t.sh"
        done
        run_one "asan/cli: no sanitizer report" bash -c "if ls $reports/* >/dev/null 2>&1; then
            echo \"FAIL sanitizer reports of the CLI: \$(ls $reports | wc -l) files, the first:\"; head -n 25 \$(ls $reports/* | head -n 1);
            else echo 'PASS no ASan/UBSan/LeakSanitizer report from the sanitizer build of tfm'; fi"
        rm -rf "$reports"
    else
        run_one "asan/cli" echo "FAIL build of $san/tfm (SAN=1)"
    fi
fi
# Kernel paths this CPU cannot run (AVX-512 on an AVX2 machine) are not skips of a missing tool: they
# run wherever the CPU has them. Said here, apart from the count.
[ "$notrun" -gt 0 ] && echo "note: $notrun checks cannot run on this CPU or build (NOTRUN lines: AVX-512 paths, huge allocations under ASan)"
# The failures again, just above the count: a log read from its end (CI's) shows which checks failed.
if [ -s "$failures" ]; then echo "failed checks:"; cut -c1-1500 "$failures"; fi
echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
