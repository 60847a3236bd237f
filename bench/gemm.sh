#!/usr/bin/env bash
# GEMM benchmark, tfm vs OpenBLAS, in one command:
#   bench/gemm.sh [--rounds R] [--ms T] [--threads 1,2] [--settle MS]
# Compiles bench/bench_gemm.c + src/ops/gemm.c, isa.c, kernels_avx512.c, core/util.c, cpu_quota.c, scratch.c (the Makefile's
# default portable flags, NATIVE=1 for -march=native; tfm_gemm needs no other library file, so
# colleagues' half-edited files cannot break this) linked against Debian's
# libopenblas with -DBENCH_WITH_OPENBLAS into ${BUILD:-build-bench-gemm}/bench/, then runs it.
# (`make bench-bin` builds the tfm-only variant without OpenBLAS.)
set -euo pipefail
cd "$(dirname "$0")/.."
B=${BUILD:-build-bench-gemm}
CC=${CC:-gcc}
mkdir -p "$B/bench"
inc=/usr/include/x86_64-linux-gnu/openblas-openmp
[ -f "$inc/cblas.h" ] || inc=/usr/include/x86_64-linux-gnu/openblas-pthread
[ -f "$inc/cblas.h" ] || inc=/usr/include/x86_64-linux-gnu   # none: bench_gemm.c declares cblas_sgemm itself
# the OpenBLAS that libopenblas.so.0 resolves to (Debian alternatives; works without libopenblas-dev)
blas=/usr/lib/x86_64-linux-gnu/libopenblas.so.0
# the default (portable) build's flags; NATIVE=1 adds -march=native like `make NATIVE=1`
OPT="-O3 -fno-math-errno"; [ "${NATIVE:-0}" = 1 ] && OPT="$OPT -march=native"
CF="-std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -fopenmp -Iinclude -Isrc ${EXTRA_CFLAGS:-}"
for f in ops/gemm ops/isa core/util core/cpu_quota core/scratch; do
    # shellcheck disable=SC2086
    "$CC" $CF $OPT -c src/$f.c -o "$B/$(basename $f).o"
done
# shellcheck disable=SC2086
"$CC" $CF $OPT -mavx512f -mavx2 -mfma -c src/ops/kernels_avx512.c -o "$B/kernels_avx512.o"
# shellcheck disable=SC2086
"$CC" $CF -O2 -I"$inc" -DBENCH_WITH_OPENBLAS bench/bench_gemm.c "$B/gemm.o" "$B/isa.o" "$B/util.o" "$B/cpu_quota.o" "$B/scratch.o" \
    "$B/kernels_avx512.o" -o "$B/bench/bench_gemm_openblas" "$blas" -lm
bash bench/sysinfo.sh
echo "# $("$CC" --version | head -1); OpenBLAS: $(readlink -f "$blas")"
exec "$B/bench/bench_gemm_openblas" "$@"
