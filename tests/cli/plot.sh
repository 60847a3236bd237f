# tfm plot: a JSON-lines training log (tests/fixtures/plot/train_log.jsonl, converted from a real
# train-mt run, see docs/LOGS.md) becomes an SVG with loss, BLEU and learning-rate panels; missing
# keys are fine; malformed lines are refused as FILE:LINE with nothing written.
source "$(dirname "$0")/lib.bash"
FIX="$(dirname "$0")/../fixtures/plot/train_log.jsonl"

expect_ok "plot the fixture log" $TFM plot "$FIX" --out "$TMP/curves.svg"
svg="$TMP/curves.svg"
if grep -q "30 records, steps 8..192, best valid BLEU 3.88 at step 192" "$TMP/out"; then pass "plot summary line";
else fail "plot summary line" "$(cat "$TMP/out")"; fi
if head -c 5 "$svg" | grep -q "<?xml" && tail -n 1 "$svg" | grep -q "^</svg>$"; then pass "plot writes a complete SVG"; else fail "plot writes a complete SVG" "bad start/end"; fi
n_poly=$(grep -c "<polyline" "$svg"); n_panel=$(grep -c '<g class="panel"' "$svg")
[ "$n_poly" -eq 5 ] && [ "$n_panel" -eq 3 ] && pass "plot: 5 curves in 3 panels" || fail "plot: 5 curves in 3 panels" "$n_poly polylines, $n_panel panels"
missing=
for label in '>step<' '>loss<' '>BLEU / chrF2<' '>learning rate<' '>train loss<' '>valid loss<' '>valid BLEU<' '>valid chrF2<' '>train_log.jsonl<'; do
    grep -q -- "$label" "$svg" || missing="$missing $label"
done
[ -z "$missing" ] && pass "plot: axis labels, legend and title" || fail "plot: axis labels, legend and title" "missing$missing"
# the valid-loss curve has one point per epoch (6), the train-loss curve one per log line (24)
pts() { grep "<polyline" "$svg" | sed -n "${1}p" | grep -o '[0-9.]*,[0-9.]*' | wc -l; }
[ "$(pts 1)" -eq 24 ] && [ "$(pts 2)" -eq 6 ] && pass "plot: points per curve" || fail "plot: points per curve" "train $(pts 1), valid $(pts 2)"
expect_ok "plot --title" $TFM plot "$FIX" --out "$TMP/t.svg" --title "run <1> & co"
grep -q ">run &lt;1&gt; &amp; co<" "$TMP/t.svg" && pass "plot title escaped" || fail "plot title escaped" "no escaped title"

# tolerant: only some keys, lines without a step, blank lines, CRLF, NaN, unknown keys, nested values
printf '{"event": "start", "argv": ["a", {"b": [1, 2.5e-3, true]}]}\r\n\n{"step": 1, "loss": 5.0}\r\n{"step": 2, "loss": NaN, "extra": "x\\"y\\u00e9"}\n  {"step": 3, "loss": 4.0, "lr": null}  \n' >"$TMP/min.jsonl"
expect_ok "plot a loss-only log" $TFM plot "$TMP/min.jsonl" --out "$TMP/min.svg"
if [ "$(grep -c '<g class="panel"' "$TMP/min.svg")" -eq 1 ] && ! grep -q "BLEU" "$TMP/min.svg" && grep -q ">train loss<" "$TMP/min.svg"; then
    pass "plot: only the panels with data"; else fail "plot: only the panels with data" "$(grep -c panel "$TMP/min.svg") panels"; fi
grep -q "3 records, steps 1..3" "$TMP/out" && pass "plot: records without a step skipped" || fail "plot: records without a step skipped" "$(cat "$TMP/out")"

# malformed lines: FILE:LINE, one line, no SVG
bad() {  # name, line 2 of the log, expected message part
    printf '{"step": 1, "loss": 2}\n%s\n{"step": 3, "loss": 1}\n' "$2" >"$TMP/bad.jsonl"
    rm -f "$TMP/bad.svg"
    expect_error "plot refuses $1" "bad.jsonl:2: column [0-9]+: $3" $TFM plot "$TMP/bad.jsonl" --out "$TMP/bad.svg"
    [ ! -e "$TMP/bad.svg" ] || fail "plot refuses $1: no output" "bad.svg written"
}
bad "trailing text" '{"step": 2} x' "unexpected text after the object"
bad "missing colon" '{"step" 2}' "expected ':' after a key"
bad "unterminated string" '{"step": 2, "note": "abc}' "unterminated string"
bad "an array line" '[1, 2]' "expected a JSON object"
bad "a bad number" '{"step": 2.}' "bad number"
bad "single quotes" "{'step': 2}" "expected a string"
bad "a truncated line" '{"step": 2, "loss": ' "bad value"
bad "a missing comma" '{"step": 2 "loss": 1}' "expected ',' or '}' after a value"
bad "a bad escape" '{"step": 2, "n": "\q"}' "bad escape"
bad "a bad nested array" '{"step": 2, "a": [1 2]}' "expected ',' or ']' in an array"
printf '{"event": "config"}\n{"loss": 1.0}\n' >"$TMP/nostep.jsonl"
expect_error "plot refuses a log without steps" 'nostep.jsonl: no line has a numeric "step"' $TFM plot "$TMP/nostep.jsonl" --out "$TMP/x.svg"
printf '{"step": 1}\n{"step": 2, "epoch": 1}\n' >"$TMP/novalues.jsonl"
expect_error "plot refuses a log without values" "novalues.jsonl: no loss, valid_loss" $TFM plot "$TMP/novalues.jsonl" --out "$TMP/x.svg"
printf '{"step": 1, "loss": "\xff"}\n' >"$TMP/utf8.jsonl"
expect_error "plot refuses invalid UTF-8" "utf8.jsonl:1: invalid UTF-8" $TFM plot "$TMP/utf8.jsonl" --out "$TMP/x.svg"
: >"$TMP/empty.jsonl"
expect_error "plot refuses an empty log" "empty.jsonl.*empty" $TFM plot "$TMP/empty.jsonl" --out "$TMP/x.svg"
expect_error "plot needs --out" "--out FILE.svg is required" $TFM plot "$FIX"
expect_error "plot: missing log" "nope.jsonl" $TFM plot "$TMP/nope.jsonl" --out "$TMP/x.svg"
expect_error "plot: output directory missing" "nodir/x.svg" $TFM plot "$FIX" --out "$TMP/nodir/x.svg"
[ ! -e "$TMP/x.svg" ] && pass "plot: nothing written on errors" || fail "plot: nothing written on errors" "x.svg exists"
