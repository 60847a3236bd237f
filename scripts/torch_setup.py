"""PyTorch set-up shared by the bench_*_torch.py twins: threads and oneDNN from the command line, and a
description of what torch actually runs on (which BLAS library is loaded, the OpenBLAS core and threading
mode, oneDNN), printed by bench/run.sh so every benchmark says how PyTorch was configured."""
import ctypes
import os

import torch


def add_args(ap):
    ap.add_argument('--mkldnn', choices=('on', 'off'), default='on',
                    help='torch.backends.mkldnn.enabled (oneDNN kernels for some ops)')


def configure(threads, mkldnn='on'):
    torch.set_num_threads(threads)
    torch.backends.mkldnn.enabled = mkldnn == 'on'


def _openblas():
    """(library path, ctypes handle) of the OpenBLAS loaded in this process, or (None, None)."""
    with open('/proc/self/maps') as f:
        libs = sorted({ln.split()[-1] for ln in f if 'openblas' in ln and ln.split()[-1].startswith('/')})
    for path in sorted(libs, key=lambda p: 'libopenblas' not in os.path.basename(p)):
        try:
            h = ctypes.CDLL(path)
            h.openblas_get_corename.restype = ctypes.c_char_p
            return path, h
        except (OSError, AttributeError):
            continue
    return None, None


def describe():
    torch.zeros(64, 64) @ torch.zeros(64, 64)  # make sure the BLAS is loaded
    lines = [f'torch {torch.__version__}: {torch.get_num_threads()} intra-op threads, '
             f'oneDNN {"on" if torch.backends.mkldnn.enabled else "off"} '
             f'(available: {torch.backends.mkldnn.is_available()}), '
             f'OMP_NUM_THREADS={os.environ.get("OMP_NUM_THREADS", "(unset)")}, '
             f'OPENBLAS_NUM_THREADS={os.environ.get("OPENBLAS_NUM_THREADS", "(unset)")}']
    with open('/proc/self/maps') as f:
        blas = sorted({ln.split()[-1] for ln in f
                       if any(k in ln for k in ('blas', 'lapack', 'mkl', 'libgomp', 'libomp'))
                       and ln.split()[-1].startswith('/')})
    lines.append('torch loaded: ' + ', '.join(os.path.realpath(p) for p in blas))
    path, h = _openblas()
    if h is not None:
        mode = {0: 'sequential', 1: 'pthreads', 2: 'OpenMP'}.get(h.openblas_get_parallel(), '?')
        cfg = ctypes.c_char_p
        h.openblas_get_config.restype = cfg
        lines.append(f'OpenBLAS {os.path.basename(path)}: core {h.openblas_get_corename().decode()}, '
                     f'{mode} threading, {h.openblas_get_num_threads()} threads; '
                     f'config: {h.openblas_get_config().decode().strip()}')
    else:
        lines.append('OpenBLAS: not loaded by torch')
    cfg_text = torch.__config__.show()
    cap = [ln.strip().lstrip('- ') for ln in cfg_text.splitlines() if 'CPU capability' in ln]
    blas_info = [w.rstrip(',') for w in cfg_text.split() if w.startswith(('BLAS_INFO=', 'USE_MKLDNN='))]
    lines.append('; '.join(cap + blas_info))
    return lines


if __name__ == '__main__':
    import argparse
    ap = argparse.ArgumentParser()
    ap.add_argument('--threads', type=int, default=2)
    add_args(ap)
    a = ap.parse_args()
    configure(a.threads, a.mkldnn)
    print('\n'.join(describe()))
