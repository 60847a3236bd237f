#!/usr/bin/env bash
# train-mt --pad-to-max-len (d2l's fixed num_steps padding): stored in the model as config.pad_len, used by
# translate, taken from the checkpoint on --resume, refused with --max-tokens or when it would change a run.
# The numerics (RNN encoder over the padding, transformer unchanged) are in tests/unit/test_seq2seq_pad.c.
. "$(dirname "$0")/lib.bash"
TFM=${TFM:-build/tfm}
d=$TMP
printf 'go .\tva !\nhi .\tsalut .\nrun !\tcours !\ni lost .\tj'"'"'ai perdu .\nwho ?\tqui ?\nwow !\tça alors !\n' > "$d/p.tsv"
RNN="--tsv $d/p.tsv --arch rnn --embed-size 8 --hidden-size 8 --n-layer 1 --batch-size 2 --min-freq 1 --max-len 6
     --threads 1 --log-every 0 --loss-norm d2l"

expect_exit "mt --pad-to-max-len with --max-tokens" 2 "pad-to-max-len.*max-tokens" \
    $TFM train-mt $RNN --epochs 1 --pad-to-max-len --max-tokens 64 --out "$d/x.tfm"
[ ! -e "$d/x.tfm" ] && pass "mt --pad-to-max-len refused: nothing written" || fail "mt --pad-to-max-len refused: nothing written" "x.tfm exists"

if $TFM train-mt $RNN --epochs 2 --pad-to-max-len --out "$d/pad.tfm" >/dev/null 2>"$d/err"; then
    pass "mt --pad-to-max-len trains (rnn)"
else
    fail "mt --pad-to-max-len trains (rnn)" "$(tail -n 2 "$d/err")"
fi
$TFM info "$d/pad.tfm" >"$d/info" 2>&1
grep -Eq '^ *pad_len +6$' "$d/info" && pass "mt pad_len stored in the model (= --max-len)" \
    || fail "mt pad_len stored in the model (= --max-len)" "$(grep -i pad "$d/info")"
out=$(printf 'go .\nwho ?\n' | $TFM translate "$d/pad.tfm" 2>"$d/err")
[ "$(printf '%s\n' "$out" | wc -l)" -eq 2 ] && pass "mt translate with a pad_len model" \
    || fail "mt translate with a pad_len model" "$out $(cat "$d/err")"

# --resume takes the flag from the checkpoint; continuing equals the uninterrupted run
$TFM train-mt $RNN --epochs 4 --pad-to-max-len --out "$d/full.tfm" >/dev/null 2>&1
$TFM train-mt --resume "$d/pad.tfm" --epochs 4 --threads 1 --out "$d/cont.tfm" >/dev/null 2>"$d/err"
a=$(printf 'go .\nhi .\n' | $TFM translate "$d/full.tfm" 2>/dev/null; $TFM export "$d/full.tfm" --out "$d/full.st" >/dev/null 2>&1 && md5sum <"$d/full.st")
b=$(printf 'go .\nhi .\n' | $TFM translate "$d/cont.tfm" 2>/dev/null; $TFM export "$d/cont.tfm" --out "$d/cont.st" >/dev/null 2>&1 && md5sum <"$d/cont.st")
[ -n "$a" ] && [ "$a" = "$b" ] && pass "mt --resume keeps --pad-to-max-len (same weights as uninterrupted)" \
    || fail "mt --resume keeps --pad-to-max-len (same weights as uninterrupted)" "$a / $b $(tail -n 1 "$d/err")"

# a run trained without it cannot be resumed with it (it would change the run)
$TFM train-mt $RNN --epochs 1 --out "$d/nopad.tfm" >/dev/null 2>&1
expect_exit "mt --resume with a different --pad-to-max-len" 2 "pad-to-max-len" \
    $TFM train-mt --resume "$d/nopad.tfm" --epochs 2 --pad-to-max-len

# safetensors keeps it: export -> import translates the same (the RNN's translation depends on pad_len)
$TFM export "$d/pad.tfm" --out "$d/pad.safetensors" >/dev/null 2>"$d/err" &&
    $TFM import "$d/pad.safetensors" --out "$d/back.tfm" >/dev/null 2>>"$d/err"
$TFM info "$d/back.tfm" 2>/dev/null | grep -Eq '^ *pad_len +6$' && pass "mt pad_len survives safetensors export/import" \
    || fail "mt pad_len survives safetensors export/import" "$(cat "$d/err")"
