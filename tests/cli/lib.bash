# Helpers for CLI tests: each check prints "PASS name" or "FAIL name: why".
# Usage: source tests/cli/lib.bash (needs $TFM, the built binary).
set -u
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

pass() { echo "PASS $1"; }
fail() { echo "FAIL $1: $2"; }
skip() { echo "SKIP $1: $2"; }   # an optional tool is missing

# expect_error NAME PATTERN CMD...: non-zero exit (not a crash), exactly one line on stderr that
# matches PATTERN (grep -E), nothing on stdout.
expect_error() {
    local name=$1 pattern=$2; shift 2
    "$@" >"$TMP/out" 2>"$TMP/err" </dev/null
    check_error "$name" "$pattern" $?
}

# expect_exit NAME STATUS PATTERN CMD...: expect_error, and the exit status is STATUS (man tfm, EXIT STATUS:
# 1 other, 2 usage, 65 bad input data, 74 I/O failure).
expect_exit() {
    local name=$1 status=$2 pattern=$3; shift 3
    "$@" >"$TMP/out" 2>"$TMP/err" </dev/null
    local rc=$?
    if [ "$rc" -ne "$status" ]; then fail "$name" "exit $rc, expected $status: $(head -c 300 "$TMP/err")"; return; fi
    check_error "$name (exit $status)" "$pattern" "$rc"
}

# check_error NAME PATTERN RC: the checks of expect_error on $TMP/err after a command exited with RC
check_error() {
    local name=$1 pattern=$2 rc=$3 lines
    lines=$(wc -l <"$TMP/err")
    if [ "$rc" -eq 0 ]; then fail "$name" "exit 0 (expected an error)"; return; fi
    if [ "$rc" -ge 128 ]; then fail "$name" "crashed (exit $rc): $(head -c 300 "$TMP/err")"; return; fi
    if [ "$lines" -ne 1 ]; then fail "$name" "expected one line on stderr, got $lines: $(head -c 300 "$TMP/err")"; return; fi
    if ! grep -Eq -- "$pattern" "$TMP/err"; then fail "$name" "message '$(cat "$TMP/err")' does not match /$pattern/"; return; fi
    pass "$name"
}

# expect_ok NAME CMD...: exit 0
expect_ok() {
    local name=$1; shift
    if "$@" >"$TMP/out" 2>"$TMP/err"; then pass "$name"; else fail "$name" "exit $?: $(tail -n 3 "$TMP/err")"; fi
}
