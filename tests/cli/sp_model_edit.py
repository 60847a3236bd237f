#!/usr/bin/python3
"""Write a copy of a SentencePiece .model with one field changed, for the bad-input tests:
    sp_model_edit.py IN OUT normalizer NAME        NormalizerSpec.name
    sp_model_edit.py IN OUT model_type N           TrainerSpec.model_type
    sp_model_edit.py IN OUT charsmap_trie_size N   the first 4 bytes of NormalizerSpec.precompiled_charsmap
    sp_model_edit.py IN OUT drop_charsmap          NormalizerSpec without precompiled_charsmap
"""
import struct
import sys


def varint(b, i):
    x = s = 0
    while True:
        c = b[i]
        i += 1
        x |= (c & 0x7F) << s
        s += 7
        if not c & 0x80:
            return x, i


def put_varint(x):
    out = bytearray()
    while True:
        c = x & 0x7F
        x >>= 7
        out.append(c | (0x80 if x else 0))
        if not x:
            return bytes(out)


def fields(b):
    i, out = 0, []
    while i < len(b):
        key, i = varint(b, i)
        f, w = key >> 3, key & 7
        if w == 0:
            v, i = varint(b, i)
        elif w == 2:
            n, i = varint(b, i)
            v, i = b[i:i + n], i + n
        elif w == 5:
            v, i = b[i:i + 4], i + 4
        else:
            v, i = b[i:i + 8], i + 8
        out.append((f, w, v))
    return out


def encode(fs):
    out = bytearray()
    for f, w, v in fs:
        out += put_varint(f << 3 | w)
        if w == 0:
            out += put_varint(v)
        elif w == 2:
            out += put_varint(len(v)) + v
        else:
            out += v
    return bytes(out)


def edit_sub(fs, field, fn):
    return [(f, w, fn(v) if f == field else v) for f, w, v in fs]


def main():
    src, dst, what = sys.argv[1:4]
    arg = sys.argv[4] if len(sys.argv) > 4 else None
    top = fields(open(src, "rb").read())
    if what == "normalizer":
        top = edit_sub(top, 3, lambda v: encode(edit_sub(fields(v), 1, lambda _: arg.encode())))
    elif what == "model_type":
        top = edit_sub(top, 2, lambda v: encode(edit_sub(fields(v), 3, lambda _: int(arg))))
    elif what == "charsmap_trie_size":
        top = edit_sub(top, 3, lambda v: encode(edit_sub(fields(v), 2, lambda c: struct.pack("<I", int(arg)) + c[4:])))
    elif what == "drop_charsmap":
        top = edit_sub(top, 3, lambda v: encode([x for x in fields(v) if x[0] != 2]))
    else:
        sys.exit("unknown edit " + what)
    open(dst, "wb").write(encode(top))


if __name__ == "__main__":
    main()
