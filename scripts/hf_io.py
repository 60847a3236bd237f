#!/usr/bin/python3
"""The files of a Hugging Face model folder, written and read without `transformers` or `safetensors`
(neither is in Debian): model.safetensors as save_pretrained writes it, and config.json.

  st_save(path, {name: tensor}, meta)   F32 (or F16 / BF16 with dtype=...), tensors sorted by name (the
                                        safetensors library's order for one dtype), header padded with
                                        spaces to 8 bytes, __metadata__ {"format": "pt"} first
  st_load(path) -> ({name: np.ndarray float32}, meta)
"""
import json
import struct

import numpy as np
import torch

DTYPES = {'F32': ('<f4', 4), 'F16': ('<f2', 2), 'BF16': (None, 2)}


def _bytes(t, dtype):
    t = t.detach().cpu().contiguous()
    if dtype == 'F32':
        return t.float().numpy().astype('<f4').tobytes()
    if dtype == 'F16':
        return t.half().numpy().astype('<f2').tobytes()
    # BF16: the top 16 bits of the float32 pattern after round-to-nearest-even (torch's conversion)
    return t.bfloat16().view(torch.int16).numpy().astype('<i2').tobytes()


def st_save(path, tensors, meta=None, dtype='F32'):
    meta = {'format': 'pt'} if meta is None else meta
    header, blobs, off = {'__metadata__': meta}, [], 0
    for name in sorted(tensors):
        t = tensors[name]
        b = _bytes(t, dtype)
        header[name] = {'dtype': dtype, 'shape': list(t.shape), 'data_offsets': [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(',', ':')).encode('utf-8')
    h += b' ' * (-(8 + len(h)) % 8)
    with open(path, 'wb') as f:
        f.write(struct.pack('<Q', len(h)) + h)
        for b in blobs:
            f.write(b)


def st_load(path):
    with open(path, 'rb') as f:
        buf = f.read()
    (n,) = struct.unpack('<Q', buf[:8])
    header = json.loads(buf[8:8 + n].decode('utf-8'))
    meta = header.pop('__metadata__', {})
    data = buf[8 + n:]
    out = {}
    for name, d in header.items():
        b, e = d['data_offsets']
        raw = data[b:e]
        if d['dtype'] == 'BF16':
            a = (np.frombuffer(raw, '<u2').astype(np.uint32) << 16).view(np.float32)
        else:
            a = np.frombuffer(raw, DTYPES[d['dtype']][0]).astype(np.float32)
        out[name] = a.reshape(d['shape'])
    return out, meta


def write_config(path, cfg):
    with open(path, 'w') as f:
        json.dump(cfg, f, indent=2, sort_keys=True)
        f.write('\n')
