#!/usr/bin/env bash
# Prints, as '#' comment lines, what a benchmark ran on: CPU model and ISA flags, the system BLAS that
# libblas.so.3 resolves to (Debian alternatives), and, given a Python with torch, the BLAS/OpenBLAS core
# and threading torch actually uses.   bench/sysinfo.sh [PYTHON]
set -u
cd "$(dirname "$0")/.."
py=${1:-}
model="$(lscpu | sed -n 's/^Model name: *//p' | head -1) (family $(lscpu | sed -n 's/^CPU family: *//p' | head -1),\
 model $(lscpu | sed -n 's/^Model: *//p' | head -1))"
cores=$(lscpu -p=CORE 2>/dev/null | grep -v '^#' | sort -u | wc -l)
isa=$(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E -x 'sse4_2|avx|avx2|fma|f16c|avx512[a-z0-9_]*|amx[a-z0-9_]*|avx_vnni' \
      | sort -u | tr '\n' ' ')
echo "# CPU: $model; $(nproc) CPUs usable ($(nproc --all) online, $cores cores); ISA flags: $isa"
alt=$(update-alternatives --display libblas.so.3-x86_64-linux-gnu 2>/dev/null | sed -n 's/^ *link currently points to //p')
echo "# libblas.so.3 -> ${alt:-unknown (update-alternatives --display libblas.so.3-x86_64-linux-gnu failed)}" \
     "$(dpkg -s libopenblas0-openmp >/dev/null 2>&1 && echo '(libopenblas0-openmp installed)' || echo '(libopenblas0-openmp NOT installed)')"
case "$alt" in
    *openblas-openmp*) ;;
    *) echo "# WARNING: libblas.so.3 is not the OpenMP OpenBLAS: PyTorch's and OpenBLAS's thread pools will fight." \
            "Fix: apt-get install libopenblas0-openmp; update-alternatives --set libblas.so.3-x86_64-linux-gnu" \
            "/usr/lib/x86_64-linux-gnu/openblas-openmp/libblas.so.3 (or bench/run.sh --setup-blas as root)" ;;
esac
if [ -n "$py" ]; then
    $py scripts/torch_setup.py --threads 1 2>&1 | sed 's/^/# /'
fi
