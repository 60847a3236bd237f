#!/usr/bin/env bash
# The installed library as a user sees it: `make install PREFIX=$tmp`, then every examples/*.c built with
# only `cc X.c $(pkg-config --cflags --libs tfm)` (shared libtfm.so, run with LD_LIBRARY_PATH) and with
# `cc -static X.c $(pkg-config --static --cflags --libs tfm)` (libtfm.a), and run on small data:
# train_lm writes the same checkpoint as `tfm train-lm` with the same settings, generate prints what
# `tfm generate` prints, translate what `tfm translate` prints (greedy and beam) for a tiny fra-eng model.
# Then `make uninstall` leaves no file behind. SKIP only without pkg-config. Uses $TFM; run from the repo root.
source "$(dirname "$0")/lib.bash"
TFM=${TFM:-build/tfm}
BUILD=$(dirname "$TFM")
FRA=../shared/data/fra-eng/fra.txt
CC=${CC:-cc}
if ! command -v pkg-config >/dev/null; then skip "examples" "pkg-config not installed"; exit 0; fi

P="$TMP/prefix"
version=$(awk '$2 ~ /^TFM_VERSION_(MAJOR|MINOR|PATCH)$/ { printf "%s%s", sep, $3; sep = "." }' include/tfm/version.h)
if make --no-print-directory -j2 BUILD="$BUILD" install PREFIX="$P" >"$TMP/install.log" 2>&1; then
    pass "make install PREFIX=tmp"
else
    fail "make install PREFIX=tmp" "$(tail -n 3 "$TMP/install.log")"; exit 1
fi
missing=""
for f in bin/tfm lib/libtfm.a "lib/libtfm.so.$version" "lib/libtfm.so.${version%%.*}" lib/libtfm.so \
         lib/pkgconfig/tfm.pc include/tfm/version.h include/tfm/seq2seq.h share/man/man1/tfm.1; do
    [ -e "$P/$f" ] || missing="$missing $f"
done
[ -z "$missing" ] && pass "installed files" || fail "installed files" "missing:$missing"
soname=$(readelf -d "$P/lib/libtfm.so.$version" 2>/dev/null | sed -n 's/.*SONAME.*\[\(.*\)\]/\1/p')
[ "$soname" = "libtfm.so.${version%%.*}" ] && pass "soname $soname" || fail "soname" "got '$soname'"
out=$("$P/bin/tfm" --version)
[ "$out" = "tfm $version" ] && pass "tfm --version" || fail "tfm --version" "got '$out', version.h says $version"
out=$("$P/bin/tfm" version)
[ "$out" = "tfm $version" ] && pass "tfm version" || fail "tfm version" "got '$out'"

export PKG_CONFIG_PATH="$P/lib/pkgconfig"
out=$(pkg-config --modversion tfm)
[ "$out" = "$version" ] && pass "pkg-config --modversion" || fail "pkg-config --modversion" "got '$out'"
# every installed header compiles on its own with the pkg-config flags only
bad=""
for h in "$P"/include/tfm/*.h; do
    printf '#include "tfm/%s"\nint main(void) { return 0; }\n' "$(basename "$h")" >"$TMP/h.c"
    $CC -std=c11 -Wall -Wextra -Werror $(pkg-config --cflags tfm) -c "$TMP/h.c" -o "$TMP/h.o" 2>>"$TMP/h.err" \
        || bad="$bad $(basename "$h")"
done
[ -z "$bad" ] && pass "installed headers self-contained" || fail "installed headers self-contained" "$bad: $(head -n 2 "$TMP/h.err")"
# the library's run-time version equals the headers' (shared and static)
printf '#include <stdio.h>\n#include <string.h>\n#include "tfm/version.h"\n%s\n' \
    'int main(void) { puts(tfm_version_string()); return strcmp(tfm_version_string(), TFM_VERSION_STRING) != 0; }' >"$TMP/v.c"
if $CC "$TMP/v.c" $(pkg-config --cflags --libs tfm) -o "$TMP/v" 2>"$TMP/err" \
   && [ "$(LD_LIBRARY_PATH="$P/lib" "$TMP/v")" = "$version" ]; then
    pass "tfm_version_string (libtfm.so)"
else
    fail "tfm_version_string (libtfm.so)" "$(head -n 3 "$TMP/err")"
fi
# tfm.pc's rpath: the program finds libtfm.so in the install prefix without LD_LIBRARY_PATH or ldconfig
[ "$(env -u LD_LIBRARY_PATH "$TMP/v" 2>&1)" = "$version" ] && pass "pkg-config --libs carries an rpath: runs without LD_LIBRARY_PATH" \
    || fail "rpath from tfm.pc" "$(env -u LD_LIBRARY_PATH "$TMP/v" 2>&1 | head -n 2)"

# build every example twice: shared (X) and static (X-static)
for src in examples/*.c; do
    x=$(basename "$src" .c)
    if $CC -Wall -Wextra -Werror "$src" $(pkg-config --cflags --libs tfm) -o "$TMP/$x" 2>"$TMP/err"; then
        if readelf -d "$TMP/$x" | grep -q "NEEDED.*libtfm.so.${version%%.*}"; then
            pass "build $x (shared)"
        else
            fail "build $x (shared)" "not linked against libtfm.so.${version%%.*}"
        fi
    else
        fail "build $x (shared)" "$(head -n 3 "$TMP/err")"
    fi
    if $CC -Wall -Wextra -Werror -static "$src" $(pkg-config --static --cflags --libs tfm) -o "$TMP/$x-static" \
        2>"$TMP/err"; then
        pass "build $x (static)"
    else
        fail "build $x (static)" "$(head -n 3 "$TMP/err")"
    fi
done
export LD_LIBRARY_PATH="$P/lib"
same() {   # NAME A B: both files non-empty and byte-identical
    if [ ! -s "$2" ] || [ ! -s "$3" ]; then fail "$1" "no output to compare ($(basename "$2"), $(basename "$3"))"
    elif cmp -s "$2" "$3"; then pass "$1"
    else fail "$1" "differ: $(diff "$2" "$3" | head -n 3)"; fi
}

# train_lm: 50 steps on data/demo.txt, the same checkpoint as tfm train-lm with the same settings
steps=50
"$TFM" train-lm --data data/demo.txt --out "$TMP/cli.tfm" --iters $steps --n-layer 2 --n-embd 64 --block-size 32 \
    --batch-size 8 --warmup 10 --eval-every $steps --eval-iters 5 >/dev/null 2>"$TMP/err" \
    || fail "tfm train-lm" "$(tail -n 2 "$TMP/err")"
for v in "" -static; do
    if "$TMP/train_lm$v" data/demo.txt "$TMP/ex$v.tfm" $steps >/dev/null 2>"$TMP/err"; then
        # the CLI's checkpoint also stores its run configuration (run.*); the model itself must be the same
        # bits: compare the weights, config and tokenizer as tfm export writes them
        "$TFM" export "$TMP/ex$v.tfm" --out "$TMP/ex$v.safetensors" 2>/dev/null
        "$TFM" export "$TMP/cli.tfm" --out "$TMP/cli.safetensors" 2>/dev/null
        same "train_lm$v = tfm train-lm (same weights, config and tokenizer)" "$TMP/ex$v.safetensors" "$TMP/cli.safetensors"
    else
        fail "train_lm$v runs" "$(tail -n 2 "$TMP/err")"
    fi
done
grep -q "^step $steps: train loss" "$TMP/err" && pass "train_lm reports its evaluation" \
    || fail "train_lm reports its evaluation" "$(tail -n 2 "$TMP/err")"

# train_mt: tfm_mt_run from C, the same checkpoint as tfm train-mt with the same settings (byte for byte: the run
# configuration is the same fields)
TSV=data/fra-eng-demo.tsv
"$TFM" train-mt --tsv "$TSV" --out "$TMP/cli_mt.tfm" --epochs 2 --num-examples 300 --threads 1 --log-every 0 \
    >/dev/null 2>"$TMP/err" || fail "tfm train-mt" "$(tail -n 2 "$TMP/err")"
for v in "" -static; do
    if "$TMP/train_mt$v" "$TSV" "$TMP/ex_mt$v.tfm" 2 >/dev/null 2>"$TMP/err"; then
        same "train_mt$v = tfm train-mt (the same checkpoint bytes)" "$TMP/ex_mt$v.tfm" "$TMP/cli_mt.tfm"
    else
        fail "train_mt$v runs" "$(tail -n 2 "$TMP/err")"
    fi
done
grep -q "^epoch 2/2: loss" "$TMP/err" && grep -q "^train-mt config: .*--tsv $TSV" "$TMP/err" \
    && pass "train_mt reports its epochs and says its configuration" || fail "train_mt reports" "$(tail -n 3 "$TMP/err")"

# generate: from the example-trained model, the text tfm generate prints for the same settings
n=120
for v in "" -static; do
    "$TMP/generate$v" "$TMP/ex.tfm" "ROMEO:" $n 0.8 20 0.9 7 >"$TMP/gen$v.txt" 2>"$TMP/err" \
        || fail "generate$v runs" "$(tail -n 2 "$TMP/err")"
done
chars=$(head -c 100000 "$TMP/gen.txt" | LC_ALL=C.UTF-8 wc -m)
first=$(head -n 1 "$TMP/gen.txt")
if [ "${first:0:6}" = "ROMEO:" ] && [ "$chars" -eq $((6 + n + 1)) ]; then pass "generate: prompt + $n characters"
else fail "generate: prompt + $n characters" "got $chars characters, first line '$first'"; fi
"$TMP/generate" "$TMP/ex.tfm" "ROMEO:" $n 0.8 20 0.9 7 >"$TMP/gen2.txt" 2>/dev/null
same "generate deterministic with a seed" "$TMP/gen.txt" "$TMP/gen2.txt"
same "generate: static = shared" "$TMP/gen.txt" "$TMP/gen-static.txt"
"$TFM" generate "$TMP/ex.tfm" --prompt "ROMEO:" --tokens $n --temperature 0.8 --top-k 20 --top-p 0.9 --seed 7 \
    >"$TMP/gen-cli.txt" 2>"$TMP/err"
same "generate = tfm generate (temperature, top-k, top-p, seed)" "$TMP/gen.txt" "$TMP/gen-cli.txt"

# translate: a tiny fra-eng transformer (300 pairs, 20 epochs); 25 training sources, greedy and beam 4
if [ ! -f "$FRA" ]; then fail "translate" "$FRA not found (run from the repo root)"; exit 1; fi
"$TFM" train-mt --tsv "$FRA" --num-examples 300 --epochs 20 --out "$TMP/mt.tfm" --log-every 0 >/dev/null \
    2>"$TMP/err" || fail "tfm train-mt" "$(tail -n 2 "$TMP/err")"
head -n 300 "$FRA" | cut -f1 | awk 'NR % 12 == 1' >"$TMP/src.txt"
nsrc=$(wc -l <"$TMP/src.txt")
for beam in 1 4; do
    "$TFM" translate "$TMP/mt.tfm" --beam $beam --batch-size 1 <"$TMP/src.txt" >"$TMP/cli$beam.txt" 2>"$TMP/err" \
        || fail "tfm translate --beam $beam" "$(tail -n 2 "$TMP/err")"
    for v in "" -static; do
        if ! "$TMP/translate$v" "$TMP/mt.tfm" $beam <"$TMP/src.txt" >"$TMP/ex$beam$v.txt" 2>"$TMP/err"; then
            fail "translate$v beam $beam runs" "$(tail -n 2 "$TMP/err")"; continue
        fi
        lines=$(wc -l <"$TMP/ex$beam$v.txt")
        empty=$(grep -c '^ *$' "$TMP/ex$beam$v.txt")
        if [ "$lines" -eq "$nsrc" ] && [ "$empty" -eq 0 ]; then pass "translate$v beam $beam: $nsrc non-empty lines"
        else fail "translate$v beam $beam: $nsrc non-empty lines" "$lines lines, $empty empty"; fi
        same "translate$v beam $beam = tfm translate" "$TMP/ex$beam$v.txt" "$TMP/cli$beam.txt"
    done
done
expect_error "translate: missing model is one line" "nope.tfm" "$TMP/translate" "$TMP/nope.tfm"

# DESTDIR stages the same tree under another root; the paths inside (tfm.pc) stay those of PREFIX
S="$TMP/stage"
if make --no-print-directory BUILD="$BUILD" install DESTDIR="$S" PREFIX=/opt/tfm >"$TMP/install.log" 2>&1 \
   && [ -e "$S/opt/tfm/lib/libtfm.so.$version" ] && [ -e "$S/opt/tfm/bin/tfm" ] \
   && grep -qx 'prefix=/opt/tfm' "$S/opt/tfm/lib/pkgconfig/tfm.pc"; then
    pass "make install DESTDIR=stage PREFIX=/opt/tfm"
else
    fail "make install DESTDIR=stage PREFIX=/opt/tfm" "$(tail -n 3 "$TMP/install.log")"
fi

if make --no-print-directory BUILD="$BUILD" uninstall PREFIX="$P" >"$TMP/install.log" 2>&1; then
    left=$(find "$P" -type f -o -type l | head -n 3)
    [ -z "$left" ] && pass "make uninstall removes every file" || fail "make uninstall removes every file" "left: $left"
else
    fail "make uninstall" "$(tail -n 3 "$TMP/install.log")"
fi
