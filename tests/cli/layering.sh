# The floors of docs/ARCHITECTURE.md, checked on the sources: a file may include headers of its own floor
# and the floors below it, never above. And every src/cli file stays short (flag parsing + library calls).
#   core  <  ops  <  nn  <  models  <  train, decode, serve (workflows)  <  http, cli
#   core  <  text <  models;   core, text  <  eval  <  train (validation BLEU), cli
source "$(dirname "$0")/lib.bash"
cd "$(dirname "$0")/../.."

# headers of each floor: include/tfm/*.h by name, plus the private headers in src/<floor>/
declare -A FLOOR_OF=(
    [core.h]=core [io.h]=core [checkpoint.h]=core [safetensors.h]=core [dist.h]=core [version.h]=core
    [ops.h]=ops [kernels.h]=ops
    [nn.h]=nn [road.h]=nn [rnn.h]=nn
    [text.h]=text [bpe.h]=text [tokenizers.h]=text
    [gpt.h]=models [seq2seq.h]=models [interchange.h]=models
    [eval.h]=eval
    [train.h]=workflow [decode.h]=workflow [lm.h]=workflow [run.h]=workflow [quantize.h]=workflow
    [translator.h]=workflow [generator.h]=workflow [serve.h]=workflow [export.h]=core
    [tfm.h]=umbrella
)
declare -A ALLOWED=(
    [core]="core" [ops]="core ops" [nn]="core ops nn" [text]="core text"
    [models]="core ops nn text models" [eval]="core text eval"
    [train]="core ops nn text models eval workflow" [decode]="core ops nn text models workflow"
    [serve]="core ops nn text models workflow"
    [http]="core text workflow http"   # the HTTP layer of tfm serve: the engine's API, never the models below it
)
floor_of_include() {   # "tfm/x.h" or "dir/x.h" -> floor
    case "$1" in
        tfm/*) echo "${FLOOR_OF[${1#tfm/}]:-unknown}" ;;
        train/*|decode/*|serve/*) echo workflow ;;
        */*) echo "${1%%/*}" ;;
        *) echo local ;;
    esac
}
bad=0
for f in src/*/*.c src/*/*.h; do
    floor=$(basename "$(dirname "$f")")
    [ "$floor" = cli ] && continue
    allowed=" ${ALLOWED[$floor]:-} "
    while read -r inc; do
        fl=$(floor_of_include "$inc")
        [ "$fl" = local ] && continue
        if [[ "$allowed" != *" $fl "* ]]; then
            fail "layering: $f" "includes $inc (floor '$fl'; $floor may include:$allowed)"
            bad=1
        fi
    done < <(sed -n 's/^#include "\([^"]*\)".*/\1/p' "$f")
done
[ $bad -eq 0 ] && pass "layering: every src/ file includes only its own floor and the floors below"

# the public headers follow the floors too, so no chain of includes reaches up: a file's includes are checked
# above, and every header they pull in may include only its own floor and the floors below it
declare -A RANK=([core]=0 [ops]=1 [text]=1 [nn]=2 [eval]=2 [models]=3 [workflow]=4 [umbrella]=9)
hbad=""
for h in include/tfm/*.h; do
    hf=${FLOOR_OF[$(basename "$h")]:-unknown}
    while read -r inc; do
        fl=$(floor_of_include "$inc")
        [ "$fl" = local ] && continue
        if [ "${RANK[$fl]:-99}" -gt "${RANK[$hf]:-0}" ] || { [ "${RANK[$fl]:-99}" -eq "${RANK[$hf]:-0}" ] && [ "$fl" != "$hf" ]; }; then
            hbad="$hbad $(basename "$h") ($hf) includes $inc ($fl);"
        fi
    done < <(sed -n 's/^#include "\([^"]*\)".*/\1/p' "$h")
done
[ -z "$hbad" ] && pass "layering: every public header includes only its floor and below (no chain of includes reaches up)" \
    || fail "layering: headers reach up" "$hbad"

# and the calls: an object of a floor uses no function defined on a higher floor (or a sibling floor), read off
# the built objects with nm: a declaration borrowed without its header would pass the include checks
OBJ=${TFM:+${TFM%/tfm}/src}
if [ -n "$OBJ" ] && [ -d "$OBJ" ] && command -v nm >/dev/null; then
    declare -A ORANK=([core]=0 [ops]=1 [text]=1 [nn]=2 [eval]=2 [models]=3 [train]=4 [decode]=4 [serve]=4)
    for fl in "${!ORANK[@]}"; do
        for o in "$OBJ/$fl"/*.o; do [ -f "$o" ] && nm --defined-only "$o" | awk -v f="$fl" '$2 ~ /^[TDBR]$/ {print $3, f}'; done
    done | sort -u >"$TMP/defs"
    up=""
    for fl in core ops text nn eval models; do
        for o in "$OBJ/$fl"/*.o; do
            [ -f "$o" ] || continue
            while read -r sym dfl; do
                if [ "${ORANK[$dfl]}" -gt "${ORANK[$fl]}" ] || { [ "${ORANK[$dfl]}" -eq "${ORANK[$fl]}" ] && [ "$dfl" != "$fl" ]; }; then
                    up="$up $fl/$(basename "$o" .o) calls $sym ($dfl);"
                fi
            done < <(nm -u "$o" | awk '{print $2}' | sort -u | join - "$TMP/defs")
        done
    done
    [ -z "$up" ] && pass "layering: no object calls up a floor (nm: core, ops, text, nn, eval, models)" \
        || fail "layering: calls up a floor" "$up"
else
    fail "layering: calls" "no built objects beside $TFM (make builds them) or no nm"
fi

# the rules of issue 9 spelled out (each would also be caught above)
n=$(grep -l '#include "tfm/\(train\|decode\|lm\)\.h"' src/models/* 2>/dev/null | wc -l)
[ "$n" -eq 0 ] && pass "layering: no src/models file includes a workflow header (train.h, decode.h, lm.h)" \
    || fail "layering: models include workflow headers" "$(grep -l '#include "tfm/\(train\|decode\|lm\)\.h"' src/models/*)"
n=$(grep -l '#include "\(tfm/ops\.h\|tfm/kernels\.h\|ops/\)' src/core/* 2>/dev/null | wc -l)
[ "$n" -eq 0 ] && pass "layering: no src/core file includes an ops header" \
    || fail "layering: core includes ops headers" "$(grep -l '#include "\(tfm/ops\.h\|tfm/kernels\.h\|ops/\)' src/core/*)"

long=""
for f in src/cli/*.c src/cli/*.h; do
    n=$(wc -l <"$f")
    [ "$n" -gt 150 ] && long="$long $f ($n lines)"
done
[ -z "$long" ] && pass "layering: every src/cli file has at most 150 lines" || fail "layering: long src/cli files" "$long"

# every public header compiles on its own (its includes are complete)
hdr_bad=""
for h in include/tfm/*.h; do
    echo "#include \"tfm/$(basename "$h")\"" | ${CC:-cc} -std=c11 -Iinclude -fsyntax-only -Wall -Wextra -Werror -x c - \
        2>"$TMP/h.err" || hdr_bad="$hdr_bad $(basename "$h")"
done
[ -z "$hdr_bad" ] && pass "layering: every include/tfm header compiles alone" || fail "layering: headers not self-contained" "$hdr_bad"
