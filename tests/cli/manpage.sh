#!/usr/bin/env bash
# man/tfm.1 documents what the binary does: it renders without groff warnings, has a section for every
# command `tfm --help` lists (and every subcommand: demo NAME, bpe learn|encode|decode), and in each
# command's section every flag that `tfm COMMAND --help` prints, with the same value kind (N, X, S) and
# the same default. Run from the repo root.
source "$(dirname "$0")/lib.bash"
TFM=${TFM:-build/tfm}
MAN=man/tfm.1
if ! command -v groff >/dev/null; then skip "man page" "groff not installed"; exit 0; fi
if groff -man -Tascii -ww -z "$MAN" 2>"$TMP/warn" && [ ! -s "$TMP/warn" ]; then pass "man page renders without warnings"
else fail "man page renders without warnings" "$(head -n 2 "$TMP/warn")"; fi
# one paragraph per line: very long lines, no hyphenation, no adjustment
groff -man -Tascii -rLL=2000n -rHY=0 -dAD=l -P-cbou "$MAN" 2>/dev/null | sed 's/[[:space:]]*$//' >"$TMP/man.txt"
version=$(awk '$2 ~ /^TFM_VERSION_(MAJOR|MINOR|PATCH)$/ { printf "%s%s", sep, $3; sep = "." }' include/tfm/version.h)
grep -q "tfm $version" "$TMP/man.txt" && pass "man page names version $version" \
    || fail "man page names version $version" "update .TH and the --version section of $MAN"
grep -q '^EXIT STATUS' "$TMP/man.txt" && pass "man page has EXIT STATUS" || fail "man page has EXIT STATUS" "missing"

# section_of "train-lm": the lines of the subsection titled "tfm train-lm ..." up to the next title
section_of() {
    awk -v t="tfm $1" '
        /^   [^ ]/ || /^[A-Z]/ { on = (substr($0, 4, length(t)) == t && (length($0) == 3 + length(t) ||
                                      substr($0, 4 + length(t), 1) == " ")) ; next }
        on' "$TMP/man.txt"
}
check_command() {   # NAME, then the command words to get its --help
    local name=$1; shift
    section_of "$name" >"$TMP/sec"
    if [ ! -s "$TMP/sec" ]; then fail "man: tfm $name" "no section titled 'tfm $name' in $MAN"; return; fi
    "$TFM" "$@" --help >"$TMP/help" 2>&1
    local dup
    dup=$(grep -oE '^  --[a-z0-9-]+' "$TMP/help" | sort | uniq -d | tr '\n' ' ')
    [ -z "$dup" ] && pass "tfm $name --help lists every flag once" || fail "tfm $name --help lists every flag once" "twice: $dup"
    local bad="" n=0 flag kind desc def
    while IFS= read -r line; do
        [[ $line =~ ^\ \ --([a-z0-9-]+)(\ ([NXS]))?\ +(.*)$ ]] || continue
        flag=${BASH_REMATCH[1]} kind=${BASH_REMATCH[3]} desc=${BASH_REMATCH[4]}
        [ "$flag" = help ] && continue
        n=$((n + 1))
        # the tag line "--flag K" (text may follow on the same line) and the paragraph up to the next tag
        awk -v tag="--$flag${kind:+ $kind}" '
            { s = $0; sub(/^ +/, "", s) }
            s ~ /^--[a-z0-9-]+( [NXS])?( |$)/ { on = (s == tag || index(s, tag " ") == 1) }
            on' "$TMP/sec" >"$TMP/par"
        if [ ! -s "$TMP/par" ]; then bad="$bad --$flag${kind:+ $kind} (missing)"; continue; fi
        if [[ $desc =~ \(default\ ([^\(\)]*)\)$ ]]; then
            def=${BASH_REMATCH[1]}
            grep -qF "(default $def)" "$TMP/par" || bad="$bad --$flag (default $def not stated)"
        fi
    done <"$TMP/help"
    if [ "$n" -eq 0 ] && grep -q -- '--[a-z]' "$TMP/help" && ! grep -q '^  --help' "$TMP/help"; then
        bad="$bad (could not read any flag from tfm $* --help)"
    fi
    [ -z "$bad" ] && pass "man: tfm $name ($n flags, defaults)" || fail "man: tfm $name" "$bad"
}
# subcommands (tfm demo NAME, tfm bpe learn|encode|decode): a "demos:" / "subcommands:" list in the
# command's help, or lower-case words after "tfm COMMAND" in its usage lines
subcommands_of() {
    "$TFM" "$1" --help 2>&1 | awk -v c="$1" '
        /^[a-z]+:$/ { list = ($0 == "demos:" || $0 == "subcommands:"); next }
        list && /^  [a-z]/ { if (!seen[$1]++) print $1; next }
        /^(usage:| )/ { for (i = 1; i + 2 <= NF; i++)
                            if ($i == "tfm" && $(i + 1) == c && $(i + 2) ~ /^[a-z][a-z-]*$/ && !seen[$(i + 2)]++)
                                print $(i + 2) }'
}
commands=$("$TFM" --help | awk '/^commands:/ { on = 1; next } on && /^  [a-z]/ { print $1 }')
[ -n "$commands" ] || fail "man: command list" "tfm --help lists no commands"
for c in $commands; do
    subs=$(subcommands_of "$c")
    if [ -n "$subs" ]; then
        for d in $subs; do check_command "$c $d" "$c" "$d"; done
    else
        check_command "$c" "$c"
    fi
done
