#!/usr/bin/python3
"""Write tests/fixtures/unigram/compat.txt: lines full of characters that NFKC and SentencePiece's nmt_nfkc
rules rewrite (full-width and half-width forms, ligatures, NBSP and the other spaces, combining accents,
circled and parenthesized numbers, superscripts, Roman numerals, CJK compatibility, math letters,
zero-width and control characters), mixed with words, runs of spaces and leading/trailing spaces.
Deterministic (seeded); the same file is committed.

    python3 scripts/make_compat_text.py > tests/fixtures/unigram/compat.txt
"""
import random

RANGES = [
    (0x00A0, 0x00FF), (0x0132, 0x0149), (0x01C4, 0x01CC), (0x02B0, 0x02FF), (0x0300, 0x036F),
    (0x1E00, 0x1EFF), (0x1F00, 0x1FFF), (0x2000, 0x206F), (0x2070, 0x209F), (0x20A0, 0x20C0),
    (0x2100, 0x218B), (0x2190, 0x21FF), (0x2460, 0x24FF), (0x2E80, 0x2FD5), (0x3000, 0x30FF),
    (0x3131, 0x318E), (0x3200, 0x33FF), (0xF900, 0xFAD9), (0xFB00, 0xFB4F), (0xFE10, 0xFE6B),
    (0xFF01, 0xFFEE), (0x1D400, 0x1D7FF), (0x1F100, 0x1F1FF),
]
EXTRA = "\t\u200b\u200c\u200d\u2060\ufeff\u00ad\u2028\u2029\u0085\u3000\u00a0\u202f\u205f\u0001\u007f\r\u2581"
WORDS = ["Haus", "café", "naïve", "Ångström", "ﬁnance", "ﬂoor", "①②③", "Ｔｏｋｙｏ", "ｶﾀｶﾅ", "x²+y³", "Ⅻ",
         "e\u0301", "A\u030a", "n\u0303o", "㍿", "㈱", "ℌ𝔢𝔩𝔩𝔬", "½", "№5", "™", "…", "ß", "İstanbul", "ﬀ"]


def main():
    rng = random.Random(31)
    chars = [chr(c) for lo, hi in RANGES for c in range(lo, hi + 1)
             if not (0xD800 <= c <= 0xDFFF)] + list(EXTRA)
    lines = ["", " ", "   ", "\u00a0", "\u3000\u3000word\u3000", "  two  spaces  ", "ﬁ", "①", "Ｆｕｌｌ　ｗｉｄｔｈ"]
    lines += [chr(c) for lo, hi in RANGES[:3] for c in range(lo, hi + 1, 7)]
    for _ in range(600):
        parts = []
        for _ in range(rng.randint(1, 12)):
            r = rng.random()
            if r < 0.3:
                parts.append(rng.choice(WORDS))
            elif r < 0.45:
                parts.append(" " * rng.randint(1, 3))
            else:
                parts.append("".join(rng.choice(chars) for _ in range(rng.randint(1, 5))))
        lines.append("".join(parts))
    for line in lines:
        print(line)


if __name__ == "__main__":
    main()
