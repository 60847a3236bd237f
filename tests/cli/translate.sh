#!/usr/bin/env bash
# tfm translate's output options on a small fra-eng model trained here: the stored decoding settings
# (train-mt --decode-beam/--decode-alpha) are the defaults and flags override them; --n-best prints Moses/
# Marian n-best lines whose first hypothesis is the 1-best output and whose scores are sorted; --scores and
# --alignment append fields; --prefix-file forces the start; long sources are cut with one warning; bad
# combinations are one-line errors; ensembles (`tfm translate A.tfm B.tfm`): two copies of a model translate as
# the model, two models differently from each, the first model's stored settings are the defaults, mismatched
# vocabularies and --alignment are one-line errors; a stored ensemble (tfm average --ensemble) translates as its
# members do, and the files it cannot be (members elsewhere, mismatched, missing; quantize, export) are refused.
# Uses $TFM; run from the repo root.
source "$(dirname "$0")/lib.bash"
TFM=${TFM:-build/tfm}
FRA=../shared/data/fra-eng/fra.txt
[ -r "$FRA" ] || { skip "translate" "$FRA missing"; exit 0; }
head -n 3000 "$FRA" >"$TMP/fra.txt"
if ! $TFM train-mt --tsv "$TMP/fra.txt" --out "$TMP/m.tfm" --epochs 3 --threads 2 --log-every 0 --decode-beam 3 \
        --decode-alpha 0.6 --src-lang en --tgt-lang fr >/dev/null 2>"$TMP/err"; then
    fail "train a small model" "$(tail -n 2 "$TMP/err")"; exit 0
fi
cut -f1 "$TMP/fra.txt" | sed -n '200,260p' >"$TMP/src.txt"
n=$(wc -l <"$TMP/src.txt")
$TFM info "$TMP/m.tfm" >"$TMP/info"
grep -Eq "^  beam +3$" "$TMP/info" && grep -Eq "^  alpha +0.6$" "$TMP/info" && grep -Eq "^  src_lang +en$" "$TMP/info" \
    && pass "info shows decode.beam, decode.alpha and the language pair" || fail "info" "$(cat "$TMP/info")"

run() { $TFM translate "$TMP/m.tfm" --threads 2 "$@" <"$TMP/src.txt" 2>>"$TMP/err"; }
run >"$TMP/default"; run --beam 3 --alpha 0.6 >"$TMP/b3"; run --beam 1 --alpha 0 >"$TMP/greedy"
cmp -s "$TMP/default" "$TMP/b3" && pass "no flags = the stored --beam 3 --alpha 0.6" \
    || fail "stored defaults" "$(diff "$TMP/default" "$TMP/b3" | head -n 4)"
cmp -s "$TMP/default" "$TMP/greedy" && fail "--beam 1 overrides the stored beam" "greedy output = beam 3 output" \
    || pass "--beam 1 overrides the stored beam"

run --n-best 3 >"$TMP/nbest"
awk -F' \\|\\|\\| ' 'NF != 3 || $1 !~ /^[0-9]+$/ || $3 !~ /^-?[0-9.]+$/ { bad = 1 } END { exit bad }' "$TMP/nbest" \
    && pass "--n-best 3: 'INDEX ||| TEXT ||| SCORE' lines" || fail "--n-best format" "$(head -n 3 "$TMP/nbest")"
[ "$(wc -l <"$TMP/nbest")" -eq $((3 * n)) ] && pass "--n-best 3: three lines per input" \
    || fail "--n-best 3 line count" "$(wc -l <"$TMP/nbest") for $n inputs"
awk -F' \\|\\|\\| ' 'BEGIN { prev = -1 } $1 != prev { print $2 } { prev = $1 }' "$TMP/nbest" | cmp -s - "$TMP/default" \
    && pass "--n-best: the first hypothesis of each input is the 1-best output" || fail "n-best first = 1-best" "differs"
awk -F' \\|\\|\\| ' '$1 == prev && $3 > last + 1e-6 { bad = 1 } { prev = $1; last = $3 } END { exit bad }' "$TMP/nbest" \
    && pass "--n-best: scores sorted within each input" || fail "n-best sorted" "$(head -n 6 "$TMP/nbest")"
# --maxi-batch: lines read ahead and sorted by length together; the output keeps the input order, the same
# translations as batches taken as read (--n-best's indices count the input lines in order)
run --batch-size 4 --maxi-batch 1 --n-best 1 >"$TMP/mb1"; run --batch-size 4 --maxi-batch 8 --n-best 1 >"$TMP/mb8"
cmp -s "$TMP/mb1" "$TMP/mb8" && [ "$(cut -d' ' -f1 "$TMP/mb8" | tr '\n' ' ')" = "$(seq 0 $((n - 1)) | tr '\n' ' ')" ] \
    && pass "--maxi-batch 8 = --maxi-batch 1, in input order" || fail "--maxi-batch" "$(diff "$TMP/mb1" "$TMP/mb8" | head -n 4)"
$TFM translate "$TMP/m.tfm" --maxi-batch 0 <"$TMP/src.txt" >/dev/null 2>"$TMP/e"; rc=$?
[ $rc = 2 ] && grep -q -- "--maxi-batch must be in 1..1024" "$TMP/e" && pass "--maxi-batch 0: usage error" \
    || fail "--maxi-batch 0" "rc $rc: $(cat "$TMP/e")"
run --scores >"$TMP/scores"
sed 's/ ||| -\?[0-9.]*$//' "$TMP/scores" | cmp -s - "$TMP/default" && \
    paste -d'\n' <(awk -F' \\|\\|\\| ' 'BEGIN { prev = -1 } $1 != prev { print $3 } { prev = $1 }' "$TMP/nbest") \
                 <(sed 's/.* ||| //' "$TMP/scores") | awk 'NR % 2 { a = $1; next } $1 != a { bad = 1 } END { exit bad }' \
    && pass "--scores: the 1-best line plus the n-best list's first score" || fail "--scores" "$(head -n 2 "$TMP/scores")"
run --alignment >"$TMP/align"
awk -F' \\|\\|\\| ' 'NF != 2 || $2 !~ /^([0-9]+-[0-9]+ ?)*$/ { bad = 1 } END { exit bad }' "$TMP/align" \
    && sed 's/ ||| .*//' "$TMP/align" | cmp -s - "$TMP/default" \
    && pass "--alignment: ' ||| s-t ...' pairs after the 1-best text" || fail "--alignment" "$(head -n 2 "$TMP/align")"
# every target token has one pair, and source indices are within the source
paste -d'\t' "$TMP/src.txt" "$TMP/align" | awk -F'\t' '{ split($2, p, " \\|\\|\\| "); n = split(p[2], a, " ");
    for (i = 1; i <= n; i++) { split(a[i], st, "-"); if (st[2] != i - 1) bad = 1 } } END { exit bad }' \
    && pass "--alignment: one pair per target token, in order" || fail "--alignment pairs" "$(head -n 2 "$TMP/align")"

# --prefix-file: line i starts translation i
awk '{ print (NR % 2) ? "je" : "" }' "$TMP/src.txt" >"$TMP/prefix.txt"
run --prefix-file "$TMP/prefix.txt" >"$TMP/pre"
paste -d'\t' "$TMP/prefix.txt" "$TMP/pre" "$TMP/default" | awk -F'\t' '$1 != "" && index($2, $1) != 1 { bad = 1 }
    $1 == "" && $2 != $3 { bad = 1 } END { exit bad }' && pass "--prefix-file: prefixed lines start with it, empty lines change nothing" \
    || fail "--prefix-file" "$(paste "$TMP/prefix.txt" "$TMP/pre" | head -n 4)"
head -n 3 "$TMP/prefix.txt" >"$TMP/short.txt"
expect_exit "--prefix-file shorter than stdin" 65 "prefix-file .*3 lines, stdin has more" \
    sh -c "$TFM translate $TMP/m.tfm --prefix-file $TMP/short.txt < $TMP/src.txt"

# a source longer than --max-src: cut, and one warning at the end with the count
{ echo "go ."; printf 'we %.0s' $(seq 30); echo; } >"$TMP/long.txt"
$TFM translate "$TMP/m.tfm" --max-src 8 <"$TMP/long.txt" >"$TMP/out" 2>"$TMP/err"
grep -q "warning: 1 of 2 source sentences were cut to 8 tokens incl. <eos> (--max-src), the longest by 23 tokens" "$TMP/err" \
    && [ "$(wc -l <"$TMP/out")" -eq 2 ] && pass "--max-src: the cut is counted once, with the flag" \
    || fail "--max-src warning" "$(cat "$TMP/err")"

expect_exit "--n-best above the beam" 2 "n-best 4 needs a beam of at least 4" \
    sh -c "echo go | $TFM translate $TMP/m.tfm --n-best 4"
expect_exit "--prefix-file missing" 74 "prefix-file: cannot read" \
    sh -c "echo go | $TFM translate $TMP/m.tfm --prefix-file $TMP/none"

# ensembles: A A = A (hypotheses and scores); A B differs from A and from B; the first model's decode.beam/alpha
if ! $TFM train-mt --tsv "$TMP/fra.txt" --out "$TMP/m2.tfm" --epochs 3 --threads 2 --log-every 0 --seed 2 >/dev/null \
        2>"$TMP/err"; then
    fail "train a second model" "$(tail -n 2 "$TMP/err")"; exit 0
fi
run2() { local a=$1 b=$2; shift 2; $TFM translate "$a" "$b" --threads 2 "$@" <"$TMP/src.txt" 2>>"$TMP/err"; }
run2 "$TMP/m.tfm" "$TMP/m.tfm" >"$TMP/e_aa"; run2 "$TMP/m.tfm" "$TMP/m.tfm" --n-best 3 >"$TMP/e_aa_nbest"
run2 "$TMP/m.tfm" "$TMP/m.tfm" --beam 1 --alpha 0 --scores >"$TMP/e_aa_greedy"; run --beam 1 --alpha 0 --scores >"$TMP/greedy_sc"
cmp -s "$TMP/e_aa" "$TMP/default" && cmp -s "$TMP/e_aa_nbest" "$TMP/nbest" && cmp -s "$TMP/e_aa_greedy" "$TMP/greedy_sc" \
    && pass "ensemble of two copies = the model (beam 3 1-best, 3-best with scores, greedy with scores)" \
    || fail "ensemble of two copies" "$(diff "$TMP/e_aa_nbest" "$TMP/nbest" | head -n 4)"
run2 "$TMP/m.tfm" "$TMP/m2.tfm" >"$TMP/e_ab"; run2 "$TMP/m.tfm" "$TMP/m2.tfm" --beam 3 --alpha 0.6 >"$TMP/e_ab3"
# the scores, not the texts: two small models can agree on every text (on one CPU's float order the ensemble's
# 61 texts were model B's), but the ensemble's scores are the mean of both models' log-probabilities
run2 "$TMP/m.tfm" "$TMP/m2.tfm" --scores >"$TMP/e_ab_sc"; run --scores >"$TMP/a_sc"
$TFM translate "$TMP/m2.tfm" --threads 2 --beam 3 --alpha 0.6 --scores <"$TMP/src.txt" >"$TMP/b3_m2_sc" 2>>"$TMP/err"
[ "$(wc -l <"$TMP/e_ab")" -eq "$n" ] && [ "$(wc -l <"$TMP/e_ab_sc")" -eq "$n" ] && ! cmp -s "$TMP/e_ab_sc" "$TMP/a_sc" \
    && ! cmp -s "$TMP/e_ab_sc" "$TMP/b3_m2_sc" \
    && pass "ensemble of two models: one line per input, scores unlike either model's" \
    || fail "ensemble of two models" "$(diff "$TMP/e_ab_sc" "$TMP/b3_m2_sc" | head -n 4)"
run2 "$TMP/m2.tfm" "$TMP/m.tfm" >"$TMP/e_ba"; run2 "$TMP/m2.tfm" "$TMP/m.tfm" --beam 1 --alpha 0 >"$TMP/e_ba1"
cmp -s "$TMP/e_ab" "$TMP/e_ab3" && cmp -s "$TMP/e_ba" "$TMP/e_ba1" \
    && pass "ensemble: the first model's stored settings are the defaults (A B: beam 3; B A: greedy)" \
    || fail "ensemble defaults" "$(diff "$TMP/e_ab" "$TMP/e_ab3" | head -n 4)"
head -n 600 "$TMP/fra.txt" >"$TMP/small.txt"
$TFM train-mt --tsv "$TMP/small.txt" --out "$TMP/m3.tfm" --epochs 1 --threads 2 --log-every 0 >/dev/null 2>&1
expect_exit "ensemble of models with other vocabularies" 65 "ensemble: .*m.tfm has [0-9]+ source tokens, .*m3.tfm has [0-9]+" \
    sh -c "echo go | $TFM translate $TMP/m.tfm $TMP/m3.tfm"
expect_exit "ensemble with --alignment" 2 "alignment.*not supported for an ensemble of 2 models" \
    sh -c "echo go | $TFM translate $TMP/m.tfm $TMP/m2.tfm --alignment"

# stored ensembles (tfm average --ensemble): OUT = A's weights naming B, found beside OUT; translate OUT = A B
mkdir -p "$TMP/ens" && cp "$TMP/m2.tfm" "$TMP/ens/m2.tfm"
$TFM average --ensemble -o "$TMP/ens/e.tfm" "$TMP/m.tfm" "$TMP/ens/m2.tfm" >/dev/null 2>"$TMP/err" \
    || fail "average --ensemble" "$(cat "$TMP/err")"
$TFM translate "$TMP/ens/e.tfm" --threads 2 --scores <"$TMP/src.txt" >"$TMP/e_stored_sc" 2>>"$TMP/err"
cmp -s "$TMP/e_stored_sc" "$TMP/e_ab_sc" && pass "a stored ensemble of A and B translates as A B (texts and scores)" \
    || fail "stored ensemble = A B" "$(diff "$TMP/e_stored_sc" "$TMP/e_ab_sc" | head -n 4)"
$TFM info "$TMP/ens/e.tfm" | grep -Eq "^  ensemble +m2.tfm$" && pass "info shows the stored ensemble's members" \
    || fail "info ensemble" "$($TFM info "$TMP/ens/e.tfm" | grep -i ensemble)"
expect_exit "average --ensemble: a member outside OUT's folder" 2 "m2.tfm must be in the folder of .*e2.tfm" \
    $TFM average --ensemble -o "$TMP/ens/e2.tfm" "$TMP/m.tfm" "$TMP/m2.tfm"
expect_exit "average --ensemble: members with other vocabularies" 65 "ensemble: .*has [0-9]+ source tokens" \
    sh -c "cp $TMP/m3.tfm $TMP/ens/m3.tfm && $TFM average --ensemble -o $TMP/ens/e3.tfm $TMP/m.tfm $TMP/ens/m3.tfm"
expect_exit "average --ensemble: a member that is a stored ensemble" 65 "e.tfm is a stored ensemble itself" \
    $TFM average --ensemble -o "$TMP/ens/e4.tfm" "$TMP/m.tfm" "$TMP/ens/e.tfm"
expect_exit "a stored ensemble among several models" 65 "e.tfm is a stored ensemble itself" \
    sh -c "echo go | $TFM translate $TMP/m.tfm $TMP/ens/e.tfm"
mv "$TMP/ens/m2.tfm" "$TMP/ens/gone.tfm"
expect_exit "a stored ensemble whose member is missing" 74 "e.tfm: decode.ensemble: .*m2.tfm" \
    sh -c "echo go | $TFM translate $TMP/ens/e.tfm"
mv "$TMP/ens/gone.tfm" "$TMP/ens/m2.tfm"
expect_exit "quantize refuses a stored ensemble" 65 "a stored ensemble .*quantize each member" \
    $TFM quantize "$TMP/ens/e.tfm" --out "$TMP/ens/e.int8.tfm"
expect_exit "export refuses a stored ensemble" 65 "a stored ensemble .*export its members" \
    $TFM export "$TMP/ens/e.tfm" --out "$TMP/ens/e.safetensors"
$TFM average -o "$TMP/ens/avg.tfm" "$TMP/ens/e.tfm" "$TMP/m.tfm" >/dev/null 2>>"$TMP/err" \
    && ! $TFM info "$TMP/ens/avg.tfm" | grep -q ensemble \
    && pass "average of a stored ensemble's file: one model (the member names dropped)" \
    || fail "average drops decode.ensemble" "$(tail -n 2 "$TMP/err")"
