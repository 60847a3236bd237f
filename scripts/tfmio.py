#!/usr/bin/python3
"""Pure-Python (struct + numpy) reader/writer of the tfm binary container (docs/FORMAT.md).

    import tfmio
    tfmio.save('x.tfm', {'w': np.zeros((2, 3), np.float32), 'n': 3, 'lr': 1e-3, 'vocab': 'abc'})
    d = tfmio.load('x.tfm')     # dict name -> np.ndarray (float32 / int32) or bytes

Value mapping on save (entry order = dict order):
    float ndarray (any float dtype)  -> f32, same shape (float64 is rounded to float32)
    int8 ndarray                     -> i8, same shape (tfm quantize's int8 weights)
    other int/bool ndarray           -> i32, same shape (values must fit in int32)
    Python float / np.floating       -> f32 scalar of shape (1)   (like tfm_container_add_float)
    Python int / np.integer          -> i32 scalar of shape (1)   (like tfm_container_add_int)
    str                              -> raw bytes (UTF-8), shape (len)
    bytes / bytearray                -> raw bytes, shape (len)
    torch tensors are accepted too (detached, moved to CPU, converted via numpy).
A 0-d ndarray is written with ndim 0. Loading returns ndarrays for f32/i32/i8 and bytes for raw entries.

Command line:  tfmio.py FILE...   prints each entry's name, dtype, shape and a short summary.
               tfmio.py --rewrap FILE...   rewrites each file in the current format, same entries.
"""
import os
import struct
import sys
import zlib

import numpy as np

MAGIC = b'TFMC'
VERSION = 2          # written; version 1 (no per-entry CRC-32) is still read
DT_F32, DT_I32, DT_BYTES, DT_I8 = 0, 1, 2, 3
DTYPE_NAMES = {DT_F32: 'f32', DT_I32: 'i32', DT_BYTES: 'bytes', DT_I8: 'i8'}
NP_DTYPES = {DT_F32: '<f4', DT_I32: '<i4', DT_I8: 'i1'}
MIN_ENTRY_BYTES = {1: 4 + 1 + 4 + 4 + 8, 2: 4 + 1 + 4 + 4 + 8 + 4}


class TfmFormatError(ValueError):
    pass


def _to_entry(name, v):
    """-> (dtype, shape tuple, payload bytes)"""
    if hasattr(v, 'detach') and hasattr(v, 'cpu'):  # torch.Tensor without importing torch
        v = v.detach().cpu().numpy()
    if isinstance(v, str):
        b = v.encode('utf-8')
        return DT_BYTES, (len(b),), b
    if isinstance(v, (bytes, bytearray)):
        return DT_BYTES, (len(v),), bytes(v)
    if isinstance(v, (bool, int, np.integer)):
        v = np.array([v])
    elif isinstance(v, (float, np.floating)):
        v = np.array([v], dtype=np.float32)
    if not isinstance(v, np.ndarray):
        raise TypeError(f'entry {name!r}: cannot store a {type(v).__name__}')
    if v.ndim > 4:
        raise ValueError(f'entry {name!r}: ndim {v.ndim} > 4')
    if np.issubdtype(v.dtype, np.floating):
        a = np.ascontiguousarray(v, dtype='<f4')
        return DT_F32, v.shape, a.tobytes()
    if v.dtype == np.int8:
        return DT_I8, v.shape, np.ascontiguousarray(v).tobytes()
    if np.issubdtype(v.dtype, np.integer) or v.dtype == np.bool_:
        if v.size and (v.min() < -2**31 or v.max() >= 2**31):
            raise ValueError(f'entry {name!r}: value does not fit in int32')
        a = np.ascontiguousarray(v, dtype='<i4')
        return DT_I32, v.shape, a.tobytes()
    raise TypeError(f'entry {name!r}: unsupported dtype {v.dtype}')


def dumps(entries):
    """Serialize an ordered mapping (or list of (name, value) pairs) to bytes."""
    items = list(entries.items()) if hasattr(entries, 'items') else list(entries)
    names = [n for n, _ in items]
    if len(set(names)) != len(names):
        raise ValueError('duplicate entry names')
    out = [MAGIC, struct.pack('<II', VERSION, len(items))]
    for name, v in items:
        nb = name.encode('utf-8')
        if not 1 <= len(nb) <= 255 or b'\0' in nb:
            raise ValueError(f'entry name {name!r}: length must be 1..255 bytes, no NUL')
        dtype, shape, payload = _to_entry(name, v)
        head = (struct.pack('<I', len(nb)) + nb + struct.pack('<II', dtype, len(shape)) +
                struct.pack('<%dI' % len(shape), *shape) + struct.pack('<Q', len(payload)))
        crc = zlib.crc32(payload, zlib.crc32(head))   # CRC-32 of every byte of the entry
        out += [head, payload, struct.pack('<I', crc)]
    return b''.join(out)


def save(path, entries):
    """Write atomically: PATH.tmp.PID, fsync, rename (the temp file is removed on failure)."""
    data = dumps(entries)
    tmp = f'{path}.tmp.{os.getpid()}'
    try:
        with open(tmp, 'wb') as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return len(data)


def loads(data, path='<bytes>'):
    """Parse bytes; validates like the C loader and raises TfmFormatError naming path and entry."""
    n = len(data)
    pos = 0

    def need(k, what):
        if k > n - pos:
            raise TfmFormatError(f'{path}: truncated: {what} needs {k} bytes, {n - pos} left')

    def u32():
        nonlocal pos
        v = struct.unpack_from('<I', data, pos)[0]
        pos += 4
        return v

    need(12, 'header')
    if data[:4] != MAGIC:
        raise TfmFormatError(f'{path}: not a tfm file (bad magic)')
    pos = 4
    version, count = u32(), u32()
    if version not in (1, VERSION):
        raise TfmFormatError(f'{path}: unsupported version {version} (expected 1 or {VERSION})')
    min_entry = MIN_ENTRY_BYTES[version]
    if count > (n - pos) // min_entry:
        raise TfmFormatError(f'{path}: bad entry count {count}: the {n - pos} bytes that follow hold at most '
                             f'{(n - pos) // min_entry} entries (truncated or corrupt)')
    out = {}
    for i in range(count):
        start = pos
        need(4, f'entry #{i} name length')
        ln = u32()
        if not 1 <= ln <= 255:
            raise TfmFormatError(f'{path}: entry #{i}: bad name length {ln} (must be 1..255)')
        need(ln, f'entry #{i} name')
        raw = bytes(data[pos:pos + ln])
        pos += ln
        if b'\0' in raw:
            raise TfmFormatError(f'{path}: entry #{i}: name contains a NUL byte')
        name = raw.decode('utf-8', errors='replace')
        if name in out:
            raise TfmFormatError(f"{path}: duplicate entry '{name}'")
        need(8, f"entry '{name}' dtype/ndim")
        dtype, ndim = u32(), u32()
        if dtype not in DTYPE_NAMES:
            raise TfmFormatError(f"{path}: entry '{name}': unknown dtype {dtype}")
        if ndim > 4:
            raise TfmFormatError(f"{path}: entry '{name}': bad ndim {ndim} (must be 0..4)")
        if dtype == DT_BYTES and ndim != 1:
            raise TfmFormatError(f"{path}: entry '{name}': bytes entry must have ndim 1 (got {ndim})")
        need(4 * ndim, f"entry '{name}' dims")
        shape = tuple(u32() for _ in range(ndim))
        for d, v in enumerate(shape):
            if v > 2**31 - 1:
                raise TfmFormatError(f"{path}: entry '{name}': dim {d} is {v} (must be 0..2147483647)")
        want = (1 if dtype in (DT_BYTES, DT_I8) else 4) * int(np.prod(shape, dtype=object) if shape else 1)
        need(8, f"entry '{name}' payload size")
        size = struct.unpack_from('<Q', data, pos)[0]
        pos += 8
        if size != want:
            raise TfmFormatError(f"{path}: entry '{name}': size mismatch: header says {size} bytes, "
                                 f"{DTYPE_NAMES[dtype]} shape needs {want}")
        need(size, f"entry '{name}'")
        payload = data[pos:pos + size]
        pos += size
        if version >= 2:
            need(4, f"entry '{name}' checksum")
            got = u32()
            want = zlib.crc32(data[start:pos - 4])
            if got != want:
                raise TfmFormatError(f"{path}: entry '{name}': checksum mismatch (stored crc32 {got:08x}, "
                                     f"computed {want:08x}): the file is corrupt")
        if dtype == DT_BYTES:
            out[name] = bytes(payload)
        else:
            out[name] = np.frombuffer(payload, dtype=NP_DTYPES[dtype]).reshape(shape).copy()
    if pos != n:
        raise TfmFormatError(f'{path}: {n - pos} trailing bytes after the last entry')
    return out


def load(path):
    with open(path, 'rb') as f:
        return loads(f.read(), path)


def write_or_check(path, entries, check):
    """Fixture scripts: write `entries` to path (atomically, then read back), or with check=True only
    compare them byte for byte with the existing file. Prints what it did; returns 0, or 1 if
    check found a difference."""
    data = dumps(entries)
    if check:
        same = os.path.exists(path) and open(path, 'rb').read() == data
        print(f'{path}: {"identical" if same else "DIFFERS"}')
        return 0 if same else 1
    os.makedirs(os.path.dirname(path) or '.', exist_ok=True)
    n = save(path, entries)
    assert list(load(path)) == list(entries)
    print(f'wrote {path}: {len(entries)} entries, {n} bytes')
    return 0


def _summary(v):
    if isinstance(v, bytes):
        s = v[:40].decode('utf-8', errors='replace')
        return f'bytes ({len(v)}) {s!r}{"..." if len(v) > 40 else ""}'
    dt = {np.dtype(np.float32): 'f32', np.dtype(np.int8): 'i8'}.get(v.dtype, 'i32')
    shp = '(' + ','.join(map(str, v.shape)) + ')'
    if v.size == 0:
        return f'{dt} {shp}'
    if v.size <= 4:
        return f'{dt} {shp} {v.ravel().tolist()}'
    return f'{dt} {shp} min {v.min():.6g} max {v.max():.6g} mean {v.astype(np.float64).mean():.6g}'


def main(argv):
    if not argv:
        print(__doc__)
        return 2
    if argv[0] == '--rewrap':
        for p in argv[1:]:
            d = load(p)
            n = save(p, d)
            assert list(load(p)) == list(d)
            print(f'rewrote {p}: {len(d)} entries, {n} bytes (version {VERSION})')
        return 0
    rc = 0
    for p in argv:
        try:
            d = load(p)
        except (OSError, TfmFormatError) as e:
            print(f'error: {e}', file=sys.stderr)
            rc = 1
            continue
        print(f'{p}: {len(d)} entries')
        for k, v in d.items():
            print(f'  {k:40s} {_summary(v)}')
    return rc


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
