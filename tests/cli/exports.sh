# libtfm.so exports the public API and nothing else (issue 29): every function or variable a public header
# (include/tfm/*.h) declares with TFM_API is a dynamic symbol of the library, and every dynamic symbol the
# library defines is one of those (the build uses -fvisibility=hidden; internal functions stay internal).
source "$(dirname "$0")/lib.bash"
LIB=${TFM%/tfm}/libtfm.so
if ! command -v nm >/dev/null; then skip exports "no nm (binutils)"; exit 0; fi
if ! [ -f "$LIB" ]; then fail exports "no $LIB (make builds it)"; exit 0; fi
# the names declared with TFM_API: the identifier before the first '(' (functions) or ';' (variables)
awk '/TFM_API/ && !/define TFM_API/ { s = $0; while (s !~ /[;{]/ && (getline l) > 0) s = s " " l;
       sub(/\(.*/, "", s); sub(/;.*/, "", s); sub(/\[.*/, "", s); n = split(s, w, /[^A-Za-z0-9_]+/);
       for (i = n; i > 0; i--) if (w[i] != "") { print w[i]; break } }' $(ls include/tfm/*.h | grep -v export.h) | sort -u >"$TMP/declared"
# OpenMP's named critical sections (.gomp_critical_user_*) are the runtime's locks, not API
nm -D --defined-only "$LIB" | awk '$2 ~ /^[TDBRVW]$/ && $3 !~ /^\.gomp_critical_user_/ {print $3}' | sort -u >"$TMP/exported"
n=$(wc -l <"$TMP/declared")
extra=$(comm -13 "$TMP/declared" "$TMP/exported" | head -n 8 | tr '\n' ' ')
missing=$(comm -23 "$TMP/declared" "$TMP/exported" | head -n 8 | tr '\n' ' ')
[ -z "$extra" ] && pass "libtfm.so exports nothing but the TFM_API declarations ($(wc -l <"$TMP/exported") symbols)" \
    || fail "libtfm.so exports symbols no header declares with TFM_API" "$extra"
[ -z "$missing" ] && [ "$n" -gt 300 ] && pass "every TFM_API declaration ($n) is exported" \
    || fail "TFM_API declarations not exported by libtfm.so ($n declared)" "$missing"
# and no header declares a function without TFM_API (a public function the .so would hide)
bare=$(awk '/^[a-z_][a-z0-9_ \*]* \**tfm_[A-Za-z0-9_]+\(/ && !/^typedef/ && !/^static/ {print FILENAME ": " $0}' \
       include/tfm/*.h | head -n 3)
[ -z "$bare" ] && pass "every function declared in include/tfm is TFM_API" || fail "declarations without TFM_API" "$bare"
