# Thread defaults: without --threads tfm uses OMP_NUM_THREADS if set, else the CPUs it may run on
# (taskset); idle OpenMP threads spin briefly (tfm_threads_short_spin re-executes tfm once with
# GOMP_SPINCOUNT set unless OMP_WAIT_POLICY/GOMP_SPINCOUNT/KMP_BLOCKTIME is set).
source "$(dirname "$0")/lib.bash"
head -c 8000 data/demo.txt >"$TMP/small.txt"
ARGS=(--data "$TMP/small.txt" --n-layer 1 --n-head 2 --n-embd 16 --block-size 16 --batch-size 2 --iters 2
      --eval-every 2 --eval-iters 1 --out "$TMP/m.tfm" --overwrite)   # each check a new run over the last one
threads_used() { sed -En 's/.*; ([0-9]+) threads?[;,].*/\1/p' "$TMP/err" | head -n 1; }

env OMP_NUM_THREADS=1 $TFM train-lm "${ARGS[@]}" >/dev/null 2>"$TMP/err"
[ "$(threads_used)" = 1 ] && pass "OMP_NUM_THREADS=1 honoured without --threads" || fail "OMP_NUM_THREADS=1" "$(head -n 2 "$TMP/err")"
env OMP_NUM_THREADS=1 $TFM train-lm "${ARGS[@]}" --threads 2 >/dev/null 2>"$TMP/err"
[ "$(threads_used)" = 2 ] && pass "--threads 2 wins over OMP_NUM_THREADS" || fail "--threads 2" "$(head -n 2 "$TMP/err")"
if command -v taskset >/dev/null; then
    env -u OMP_NUM_THREADS taskset -c 0 $TFM train-lm "${ARGS[@]}" >/dev/null 2>"$TMP/err"
    [ "$(threads_used)" = 1 ] && pass "taskset -c 0: one thread by default (sched_getaffinity)" \
        || fail "taskset -c 0 default threads" "$(head -n 2 "$TMP/err")"
else
    skip "taskset -c 0 default threads" "taskset is not installed"
fi
# OMP_PROC_BIND=true: libgomp binds the initial thread to one CPU before main, and the short-spin re-exec
# inherited that mask: one default thread, and every thread bound to that one CPU (half speed on 2 cores)
cpus=$(nproc)
want=$((cpus < 2 ? cpus : 2))
env -u OMP_NUM_THREADS OMP_PROC_BIND=true $TFM train-lm "${ARGS[@]}" >/dev/null 2>"$TMP/err"
[ "$(threads_used)" = "$cpus" ] && pass "OMP_PROC_BIND=true: $cpus threads by default (the CPUs tfm may use, not the bound one)" \
    || fail "OMP_PROC_BIND=true default threads" "$(threads_used) threads, want $cpus: $(head -n 2 "$TMP/err")"
if ldd "$TFM" | grep -q libgomp; then
    env -u OMP_NUM_THREADS -u GOMP_SPINCOUNT OMP_PROC_BIND=true OMP_DISPLAY_AFFINITY=true \
        $TFM train-lm "${ARGS[@]}" --threads 2 >"$TMP/out" 2>&1
    n=$(sed -n 's/.* affinity \([0-9,-]*\)$/\1/p' "$TMP/out" | sort -u | wc -l)
    [ "$n" = "$want" ] && pass "OMP_PROC_BIND=true --threads 2: the threads are bound to $want different CPUs" \
        || fail "OMP_PROC_BIND=true placement" "$n distinct CPUs, want $want: $(grep affinity "$TMP/out" | head -n 3)"
fi   # (libomp: no re-exec, nothing inherits a bound mask)
# a cgroup CPU quota of one CPU (docker --cpus=1, systemd CPUQuota=100%): one thread by default, though the
# affinity mask still lists every CPU. Needs a writable cgroup cpu controller (root): v1's cpu hierarchy, or v2.
quota_cgroup() {   # prints a new cgroup directory limited to one CPU, or nothing
    local d v1
    v1=$(awk '{for (i = 7; i <= NF; i++) if ($i == "-") { if ($(i+1) == "cgroup" && $(i+3) ~ /(^|,)cpu(,|$)/) print $5; break }}' \
         /proc/self/mountinfo | head -n 1)
    if [ -n "$v1" ] && d="$v1/tfm-test-$$" && mkdir "$d" 2>/dev/null; then
        echo 100000 >"$d/cpu.cfs_period_us" && echo 100000 >"$d/cpu.cfs_quota_us" && echo "$d" && return
        rmdir "$d"
    fi
    if grep -qw cpu /sys/fs/cgroup/cgroup.controllers 2>/dev/null && d=/sys/fs/cgroup/tfm-test-$$ && mkdir "$d" 2>/dev/null; then
        { grep -qw cpu /sys/fs/cgroup/cgroup.subtree_control || echo +cpu >/sys/fs/cgroup/cgroup.subtree_control; } 2>/dev/null
        echo "100000 100000" >"$d/cpu.max" 2>/dev/null && echo "$d" && return
        rmdir "$d"
    fi
}
cg=$(quota_cgroup)
if [ -n "$cg" ]; then
    env -u OMP_NUM_THREADS sh -c 'echo $$ >"$1/cgroup.procs" && shift && exec "$@"' sh "$cg" \
        $TFM train-lm "${ARGS[@]}" >/dev/null 2>"$TMP/err"
    got=$(threads_used)
    rmdir "$cg"
    [ "$got" = 1 ] && pass "cgroup CPU quota of 1 CPU: one thread by default ($cg)" \
        || fail "cgroup CPU quota default threads" "$got threads, want 1: $(head -n 2 "$TMP/err")"
else
    skip "cgroup CPU quota default threads" "no writable cgroup cpu controller here (needs root)"
fi
if command -v strace >/dev/null && strace -f -e trace=execve -o "$TMP/st" true 2>/dev/null; then
    env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT -u KMP_BLOCKTIME strace -f -e trace=execve -o "$TMP/st" \
        $TFM train-lm "${ARGS[@]}" --threads 2 >/dev/null 2>&1
    a=$(grep -c 'execve(' "$TMP/st")
    env -u OMP_WAIT_POLICY -u KMP_BLOCKTIME GOMP_SPINCOUNT=300000 strace -f -e trace=execve -o "$TMP/st" \
        $TFM train-lm "${ARGS[@]}" --threads 2 >/dev/null 2>&1
    b=$(grep -c 'execve(' "$TMP/st")
    env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT -u KMP_BLOCKTIME strace -f -e trace=execve -o "$TMP/st" \
        $TFM train-lm "${ARGS[@]}" --threads 2 --threads=1 >/dev/null 2>&1
    c=$(grep -c 'execve(' "$TMP/st")
    if ldd "$TFM" | grep -q libgomp; then
        [ "$a" = 2 ] && [ "$b" = 1 ] && [ "$c" = 1 ] \
            && pass "libgomp: re-executed once to set the short spin, not when GOMP_SPINCOUNT is set nor at --threads 1" \
            || fail "short-spin re-exec" "execve count $a (unset) / $b (set) / $c (--threads 1 last), expected 2 / 1 / 1"
    else
        [ "$a" = 1 ] && pass "libomp: short spin set without re-executing" || fail "short spin (libomp)" "execve count $a"
    fi
else
    skip "short-spin re-exec" "strace is missing or cannot trace here"
fi
