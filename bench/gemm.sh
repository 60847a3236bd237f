#!/usr/bin/env bash
# GEMM benchmark, tfm vs OpenBLAS, in one command:
#   bench/gemm.sh [--rounds R] [--ms T] [--threads 1,2] [--settle MS]
# Compiles bench/bench_gemm.c + src/ops/gemm.c (with the Makefile's release flags; tfm_gemm needs no
# other library file, so colleagues' half-edited files cannot break this) linked against Debian's
# libopenblas with -DBENCH_WITH_OPENBLAS into ${BUILD:-build-bench-gemm}/bench/, then runs it.
# (`make bench-bin` builds the tfm-only variant without OpenBLAS.)
set -euo pipefail
cd "$(dirname "$0")/.."
B=${BUILD:-build-bench-gemm}
CC=${CC:-gcc}
mkdir -p "$B/bench"
inc=/usr/include/x86_64-linux-gnu/openblas-pthread
[ -f "$inc/cblas.h" ] || inc=/usr/include/x86_64-linux-gnu
"$CC" -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -O3 -march=native -fno-math-errno -fopenmp -Iinclude \
    ${EXTRA_CFLAGS:-} -c src/ops/gemm.c -o "$B/gemm.o"
"$CC" -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -O2 -march=native -fopenmp -Iinclude -I"$inc" \
    -DBENCH_WITH_OPENBLAS bench/bench_gemm.c "$B/gemm.o" -o "$B/bench/bench_gemm_openblas" -lopenblas -lm
echo "# $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; $("$CC" --version | head -1); OpenBLAS $(ls /usr/lib/x86_64-linux-gnu/openblas-pthread/ | sed -n 's/^libopenblasp-r\(.*\)\.so$/\1/p')"
exec "$B/bench/bench_gemm_openblas" "$@"
