# scripts/get-data.sh (issue 32, item 2) against a local file:// mirror of ../shared/data laid out like the real
# URLs (no network): every corpus fetched, unpacked (gzip for Multi30k, a zip member cut to its first 18,065
# lines for fra-eng) and equal to ../shared/data; a second run keeps them; a corrupted mirror file is refused by
# its checksum (exit 65, nothing written for it, the others fetched); a missing one is named; bad arguments.
source "$(dirname "$0")/lib.bash"
cd "$(dirname "$0")/../.."
S=../shared/data
for t in curl gzip unzip zip; do command -v $t >/dev/null || { skip "get-data" "$t not installed"; exit 0; }; done
mirror() {   # DIR: a mirror of the script's URLs built from ../shared/data
    local m=$1 c=$1/raw.githubusercontent.com/karpathy/char-rnn/6f9487a6fe5b420b7ca9afb0d7c078e37c1d1b4e/data/tinyshakespeare
    local k=$1/raw.githubusercontent.com/multi30k/dataset/a3d2e0d26b56f3846f66a952536ffed4e401d05a/data/task1/raw
    mkdir -p "$c" "$k" "$m/download.pytorch.org/tutorial" "$m/zip/data"
    cp $S/tinyshakespeare/input.txt "$c/"
    for f in train val test_2016_flickr; do for l in de en; do gzip -c $S/multi30k/$f.$l >"$k/$f.$l.gz"; done; done
    # the zip's member holds more pairs than the project's copy: the script keeps the first 18,065 lines
    { cat $S/fra-eng/fra.txt; printf 'Extra line.\tLigne de plus.\n'; } >"$m/zip/data/eng-fra.txt"
    (cd "$m/zip" && zip -q -r ../download.pytorch.org/tutorial/data.zip data)
}
mirror "$TMP/m"
export TFM_DATA_MIRROR="file://$TMP/m/"
expect_ok "get-data.sh all from the mirror" bash scripts/get-data.sh --dir "$TMP/d"
same=1
for f in tinyshakespeare/input.txt fra-eng/fra.txt multi30k/{train,val,test_2016_flickr}.{de,en}; do
    cmp -s "$S/$f" "$TMP/d/$f" || { same=0; fail "get-data: $f equals ../shared/data/$f" "differs or missing"; }
done
[ $same = 1 ] && pass "get-data: the 8 files equal ../shared/data (gunzipped, zip member cut to 18,065 lines)"
grep -q "8 downloaded, 0 already there" "$TMP/err" && pass "get-data: says what it fetched" || fail "get-data summary" "$(tail -n 1 "$TMP/err")"
[ -z "$(ls -A "$TMP/d" | grep -v '^tinyshakespeare$\|^multi30k$\|^fra-eng$')" ] && pass "get-data: no temporary files left" \
    || fail "get-data: temporary files left" "$(ls -A "$TMP/d")"
expect_ok "get-data.sh again" bash scripts/get-data.sh --dir "$TMP/d"
grep -q "0 downloaded, 8 already there" "$TMP/err" && pass "get-data: a second run keeps the checked files" \
    || fail "get-data second run" "$(tail -n 1 "$TMP/err")"

# one corrupted file in the mirror: refused by its checksum, nothing written for it, the others fetched
f=$TMP/m/raw.githubusercontent.com/multi30k/dataset/a3d2e0d26b56f3846f66a952536ffed4e401d05a/data/task1/raw/val.en.gz
gzip -dc "$f" | sed '5s/a/e/' | gzip -c >"$f.new" && mv "$f.new" "$f"
bash scripts/get-data.sh --dir "$TMP/c" multi30k >"$TMP/out" 2>"$TMP/err"; rc=$?
[ $rc -eq 65 ] && grep -q "multi30k/val.en: sha256 [0-9a-f]\{64\}, expected 1f2a23d992769b5b3d209b0a10dd0b77c08cceb1f20dfb97ed0aafa49d107227: refused" "$TMP/err" \
    && pass "get-data: a corrupted file is refused by its checksum (exit 65, named with both sums)" \
    || fail "get-data: corrupted file refused" "exit $rc: $(cat "$TMP/err")"
[ ! -e "$TMP/c/multi30k/val.en" ] && cmp -s "$TMP/c/multi30k/val.de" $S/multi30k/val.de && [ -s "$TMP/c/multi30k/train.en" ] \
    && pass "get-data: nothing written for the refused file, the others fetched" || fail "get-data: after a refusal" "$(ls "$TMP/c/multi30k")"
[ ! -e "$TMP/c/tinyshakespeare" ] && pass "get-data NAME fetches only that corpus" || fail "get-data NAME" "$(ls "$TMP/c")"
# a file already in place but altered is fetched again (and here refused: the mirror is corrupt too)
cp $S/multi30k/val.en "$TMP/d/multi30k/val.en"; printf 'x' >>"$TMP/d/multi30k/val.en"
bash scripts/get-data.sh --dir "$TMP/d" multi30k >"$TMP/out" 2>"$TMP/err"; rc=$?
[ $rc -eq 65 ] && grep -q "val.en: sha256 .*refused" "$TMP/err" && grep -q "0 downloaded, 5 already there" "$TMP/err" \
    && pass "get-data: an altered local file is checked and fetched again" || fail "get-data: altered local file" "exit $rc: $(cat "$TMP/err")"
rm "$TMP/m/download.pytorch.org/tutorial/data.zip"
bash scripts/get-data.sh --dir "$TMP/e" fra-eng >"$TMP/out" 2>"$TMP/err"; rc=$?
[ $rc -eq 65 ] && grep -q "fra-eng/fra.txt: cannot download file://$TMP/m/download.pytorch.org/tutorial/data.zip" "$TMP/err" \
    && pass "get-data: a missing source is named (exit 65)" || fail "get-data: missing source" "exit $rc: $(cat "$TMP/err")"
bash scripts/get-data.sh --dir "$TMP/e" wikipedia >"$TMP/out" 2>"$TMP/err"; rc=$?
[ $rc -eq 2 ] && grep -q "unknown argument 'wikipedia'" "$TMP/err" && pass "get-data: an unknown name is exit 2" \
    || fail "get-data: unknown name" "exit $rc: $(cat "$TMP/err")"
# the recipes read the folder: the Multi30k recipe's --data DIR finds the fetched files (its --smoke run is in recipe_multi30k.sh)
grep -q 'data=$here/data' recipes/multi30k.sh && pass "recipe reads data/ (get-data.sh's default folder) first" \
    || fail "recipe default data folder" "$(grep -n 'data=' recipes/multi30k.sh)"
