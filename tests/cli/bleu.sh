#!/usr/bin/env bash
# CLI tests for `tfm bleu`. Uses $TFM (set by tests/run.sh). Prints "PASS name" / "FAIL name: why".
set -u
cd "$(dirname "$0")/../.."
TFM=${TFM:-$PWD/build/tfm}
source "$(dirname "$0")/lib.bash"   # $TMP (removed at exit), pass, fail, skip
tmp=$TMP
fix=tests/fixtures/bleu


# expect_error NAME PATTERN ARGS...: non-zero exit, exactly one line on stderr matching PATTERN, no stdout
expect_error() {
    local name=$1 pat=$2; shift 2
    "$TFM" bleu "$@" >"$tmp/out" 2>"$tmp/err"
    local rc=$? lines
    lines=$(wc -l <"$tmp/err")
    if [ "$rc" -eq 0 ]; then fail "$name" "exit 0"
    elif [ "$lines" -ne 1 ]; then fail "$name" "$lines stderr lines: $(head -c 300 "$tmp/err")"
    elif ! grep -q -- "$pat" "$tmp/err"; then fail "$name" "stderr '$(cat "$tmp/err")' lacks '$pat'"
    elif [ -s "$tmp/out" ]; then fail "$name" "unexpected stdout"
    else pass "$name"; fi
}

# the fixture pair: the line must equal the one computed by scripts/sacrebleu_ref.py (first row of expected.txt)
out=$("$TFM" bleu "$fix/hyp.txt" "$fix/ref.txt" 2>&1)
want=$(awk '!/^#/ && $1 == 0 && $3 == 0 { printf "BLEU = %.2f", $4; exit }' "$fix/expected.txt")
case "$out" in
    "$want "*) pass bleu_cli_fixture ;;
    *) fail bleu_cli_fixture "got '$out', want prefix '$want'" ;;
esac
sig=$(printf '%s\n' "$out" | sed -n 2p); out=$(printf '%s\n' "$out" | head -n 1)
if [[ "$out" =~ ^BLEU\ =\ [0-9]+\.[0-9]{2}\ [0-9.]+/[0-9.]+/[0-9.]+/[0-9.]+\ \(BP\ =\ [0-9]\.[0-9]{3}\ ratio\ =\ [0-9]+\.[0-9]{3}\ hyp_len\ =\ [0-9]+\ ref_len\ =\ [0-9]+\)$ ]]; then
    pass bleu_cli_format
else
    fail bleu_cli_format "'$out'"
fi

# second line: sacreBLEU 2's signature of the default BLEU
case "$sig" in "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2."[0-9]*.[0-9]*) pass bleu_cli_signature ;;
    *) fail bleu_cli_signature "'$sig'" ;; esac
sig=$("$TFM" bleu "$fix/hyp.txt" "$fix/ref.txt" --lowercase 2>&1 | sed -n 2p)
case "$sig" in "nrefs:1|case:lc|eff:no|tok:13a|smooth:exp|version:2."*) pass bleu_cli_signature_lc ;;
    *) fail bleu_cli_signature_lc "'$sig'" ;; esac

# --metric chrf: the corpus chrF2 computed by scripts/chrf_ref.py (first rows of chrf_expected.txt), both cases
for lc in 0 1; do
    flag=; [ "$lc" = 1 ] && flag=--lowercase
    out=$("$TFM" bleu "$fix/hyp.txt" "$fix/ref.txt" --metric chrf $flag 2>&1)
    want=$(awk -v lc="$lc" '!/^#/ && $1 == 0 && $3 == lc { printf "chrF2 = %.2f", $4; exit }' "$fix/chrf_expected.txt")
    case_sig=mixed; [ "$lc" = 1 ] && case_sig=lc
    if [ "$(printf '%s\n' "$out" | head -n 1)" = "$want" ] &&
       [[ "$(printf '%s\n' "$out" | sed -n 2p)" == "nrefs:1|case:$case_sig|eff:yes|nc:6|nw:0|space:no|version:2."* ]] &&
       [ "$want" != "" ]; then
        pass "bleu_cli_chrf_fixture_lc$lc"
    else
        fail "bleu_cli_chrf_fixture_lc$lc" "got '$out', want '$want' + signature"
    fi
done
out=$("$TFM" bleu "$fix/ref.txt" "$fix/ref.txt" --metric chrf 2>&1 | head -n 1)
[ "$out" = "chrF2 = 100.00" ] && pass bleu_cli_chrf_identical || fail bleu_cli_chrf_identical "'$out'"

# a real translation (tests/fixtures/bleu/real_*): all four printed scores equal scripts/chrf_ref.py both's
bad=
while read -r metric lc want; do
    case "$metric" in \#*) continue ;; esac
    flag=; [ "$lc" = 1 ] && flag=--lowercase
    got=$("$TFM" bleu "$fix/real_hyp.en" "$fix/real_ref.en" --metric "$metric" $flag 2>&1 | head -n 1 | awk '{print $3}')
    [ "$got" = "$(printf '%.2f' "$want")" ] || bad="$bad $metric/lc$lc: $got vs $want"
done <"$fix/real_expected.txt"
[ -z "$bad" ] && pass bleu_cli_real_output_both_metrics || fail bleu_cli_real_output_both_metrics "$bad"

# identical files -> 100
out=$("$TFM" bleu "$fix/ref.txt" "$fix/ref.txt" 2>&1)
case "$out" in "BLEU = 100.00 100.0/100.0/100.0/100.0 (BP = 1.000 ratio = 1.000 "*) pass bleu_cli_identical ;;
    *) fail bleu_cli_identical "'$out'" ;; esac

# --lowercase: case differences stop mattering. Case-sensitive, only "." matches: p1 = 1/7 = 14.3%,
# then exp smoothing 100/(2*6) = 8.3, 100/(4*5) = 5.0, 100/(8*4) = 3.1; geometric mean = 6.57
printf 'The Cat Sat On The Mat .\n' >"$tmp/h"; printf 'the cat sat on the mat .\n' >"$tmp/r"
cs=$("$TFM" bleu "$tmp/h" "$tmp/r" 2>&1); lc=$("$TFM" bleu "$tmp/h" "$tmp/r" --lowercase 2>&1)
case "$cs|$lc" in "BLEU = 6.57 14.3/8.3/5.0/3.1 "*"|BLEU = 100.00 "*) pass bleu_cli_lowercase ;;
    *) fail bleu_cli_lowercase "cs '$cs' lc '$lc'" ;; esac

# --help exits 0 and prints usage
if "$TFM" bleu --help 2>&1 | grep -q "usage: tfm bleu"; then pass bleu_cli_help; else fail bleu_cli_help "no usage"; fi

# bad inputs: one-line errors, non-zero exit
expect_error bleu_cli_missing_hyp "$tmp/nope.txt" "$tmp/nope.txt" "$fix/ref.txt"
expect_error bleu_cli_missing_ref "$tmp/nope2.txt" "$fix/hyp.txt" "$tmp/nope2.txt"
head -n 5 "$fix/ref.txt" >"$tmp/short.txt"
expect_error bleu_cli_line_count "has 5 lines" "$fix/hyp.txt" "$tmp/short.txt"
n=$(wc -l <"$fix/hyp.txt")
expect_error bleu_cli_line_count_both "has $n lines" "$fix/hyp.txt" "$tmp/short.txt"
printf 'fine\nbad \xff byte\n' >"$tmp/bad.txt"; printf 'a\nb\n' >"$tmp/two.txt"
expect_error bleu_cli_invalid_utf8 "bad.txt:2: invalid UTF-8" "$tmp/bad.txt" "$tmp/two.txt"
printf 'a\0b\n' >"$tmp/bin.txt"
expect_error bleu_cli_binary "binary" "$tmp/two.txt" "$tmp/bin.txt"
: >"$tmp/empty.txt"
expect_error bleu_cli_empty "empty" "$tmp/empty.txt" "$tmp/two.txt"
expect_error bleu_cli_missing_arg "missing argument" "$fix/hyp.txt"
expect_error bleu_cli_extra_arg "unexpected argument" "$fix/hyp.txt" "$fix/ref.txt" extra
expect_error bleu_cli_unknown_metric "--metric: unknown metric 'ter'" "$fix/hyp.txt" "$fix/ref.txt" --metric ter
expect_error bleu_cli_chrf_line_count "has 5 lines" "$fix/hyp.txt" "$tmp/short.txt" --metric chrf
expect_error bleu_cli_unknown_flag "unknown flag" "$fix/hyp.txt" "$fix/ref.txt" --nope
