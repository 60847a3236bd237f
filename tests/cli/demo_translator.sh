# make demo-mt's script (issue 32, item 1) in its --smoke mode: every step of the demo (train-mt on the shipped
# Tatoeba pairs, translate 12 sentences with the model's stored beam, mark each seen/new, the attention SVG) with
# a tiny model in seconds; the shipped corpus is the one data/README.md describes; the Makefile has the target.
source "$(dirname "$0")/lib.bash"
cd "$(dirname "$0")/../.."
if TFM="$TFM" bash scripts/demo-mt.sh --smoke --out "$TMP/d" --threads 1 >"$TMP/out" 2>"$TMP/err"; then
    pass "demo-mt --smoke runs"
else fail "demo-mt --smoke runs" "exit $?: $(tail -n 3 "$TMP/err")"; fi
[ "$(grep -c ' => ' "$TMP/out")" -eq 12 ] && [ "$(wc -l <"$TMP/d/hypotheses.txt")" -eq 12 ] \
    && pass "demo-mt prints 12 translations" || fail "demo-mt translations" "$(cat "$TMP/out")"
grep -q "^I lost\. .*=> .*(seen)$" "$TMP/out" && grep -q "^He's calm\. .*=> .*(new)$" "$TMP/out" \
    && pass "demo-mt marks training sources seen and others new" || fail "demo-mt seen/new" "$(cat "$TMP/out")"
head -c 300 "$TMP/d/attention.svg" 2>/dev/null | grep -q '<svg' && grep -q "wrote $TMP/d/attention.svg" "$TMP/err" \
    && pass "demo-mt writes the attention picture" || fail "demo-mt attention.svg" "$(tail -n 2 "$TMP/err")"
"$TFM" info "$TMP/d/model.tfm" >"$TMP/info" 2>&1
grep -Eq 'beam +4' "$TMP/info" && grep -Eq 'src_lang +en' "$TMP/info" \
    && pass "demo-mt stores beam 4 and en->fr in the model" || fail "demo-mt stored settings" "$(grep -i 'beam\|lang' "$TMP/info")"
[ "$(wc -l <data/fra-eng-demo.tsv)" -eq 8000 ] && cmp -s data/fra-eng-demo.tsv <(head -n 8000 ../shared/data/fra-eng/fra.txt) \
    && grep -q 'fra-eng-demo.tsv' data/README.md && grep -q 'CC BY 2.0 FR' data/README.md \
    && pass "data/fra-eng-demo.tsv: the first 8,000 pairs of fra-eng, with its licence in data/README.md" \
    || fail "shipped corpus" "$(wc -l <data/fra-eng-demo.tsv) lines"
make -s help >"$TMP/help" && grep -q '^demo-mt:' Makefile && grep -q 'make demo-mt' "$TMP/help" && pass "make demo-mt exists and make help lists it" \
    || fail "make demo-mt target" "missing"
# a rerun into the same folder starts over (train-mt --overwrite), as `make demo-mt` twice does
if TFM="$TFM" bash scripts/demo-mt.sh --smoke --out "$TMP/d" --threads 1 >"$TMP/out" 2>"$TMP/err" \
    && [ "$(grep -c ' => ' "$TMP/out")" -eq 12 ]; then pass "demo-mt reruns into the same folder"
else fail "demo-mt reruns into the same folder" "$(tail -n 2 "$TMP/err")"; fi
bash scripts/demo-mt.sh --frob >"$TMP/out" 2>"$TMP/err"; rc=$?
[ $rc -eq 2 ] && grep -q "unknown option '--frob'" "$TMP/err" && pass "demo-mt: unknown option is exit 2" || fail "demo-mt bad option" "exit $rc"
