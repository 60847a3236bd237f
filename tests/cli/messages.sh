# Messages with a way out (issue 32, item 5): an unknown flag gets the flag it probably meant (the same name
# with '-' for '_', the other command family's name, reordered words, the nearest by edit distance), and no
# guess when nothing is close; a checkpoint of the other family (train-lm / train-mt) is named as such with
# the command to use; a safetensors file given where a .tfm checkpoint is wanted points to tfm import.
source "$(dirname "$0")/lib.bash"
cd "$(dirname "$0")/../.."
dym() {   # NAME WANT CMD...: exit 2, one line, "did you mean --WANT?"
    local name=$1 want=$2; shift 2
    expect_exit "did you mean: $name" 2 "unknown flag --[^ ]*: did you mean --$want\?" "$TFM" "$@"
}
dym "train-lm --n_layer -> --n-layer" n-layer train-lm --n_layer 2
dym "train-lm --epochs -> --iters (train-lm counts steps)" iters train-lm --epochs 3
grep -q "optimizer steps" "$TMP/err" && pass "did you mean --iters says why" || fail "did you mean --iters says why" "$(cat "$TMP/err")"
dym "train-mt --iters -> --epochs" epochs train-mt --iters 3
dym "train-mt --n-embd -> --d-model" d-model train-mt --n-embd 64
dym "train-lm --d-model -> --n-embd" n-embd train-lm --d-model 64
dym "train-lm --max-len -> --block-size" block-size train-lm --max-len 64
dym "generate --max-tokens -> --tokens" tokens generate m.tfm --max-tokens 5
dym "generate --temprature -> --temperature" temperature generate m.tfm --temprature 1
dym "translate --beem -> --beam" beam translate m.tfm --beem 4
dym "translate --num-beams -> --beam" beam translate m.tfm --num-beams 4
dym "train-mt --lr_min -> --min-lr (words reordered)" min-lr train-mt --lr_min 0.1
dym "train-mt --VOCAB-SIZE -> --vocab-size" vocab-size train-mt --VOCAB-SIZE 10
expect_exit "nothing close: no guess" 2 "^tfm train-lm: unknown flag --xyzzy \(see tfm train-lm --help\)$" "$TFM" train-lm --xyzzy 1

# checkpoints of the other family, and a safetensors file
"$TFM" train-lm --data data/demo.txt --out "$TMP/lm.tfm" --iters 2 --n-layer 1 --n-head 2 --n-embd 16 --block-size 16 \
    --batch-size 2 --eval-iters 1 --threads 1 --log-every 0 >/dev/null 2>&1 || fail "train a tiny LM" "exit $?"
head -n 50 ../shared/data/fra-eng/fra.txt >"$TMP/p.tsv"
"$TFM" train-mt --tsv "$TMP/p.tsv" --out "$TMP/mt.tfm" --epochs 1 --threads 1 --log-every 0 >/dev/null 2>&1 || fail "train a tiny MT" "exit $?"
expect_exit "train-mt --resume LM.tfm names a train-lm checkpoint" 2 \
    "--resume .*lm.tfm: is a language model \(train-lm\), not a translation model: continue it with tfm train-lm --resume" \
    "$TFM" train-mt --resume "$TMP/lm.tfm"
expect_exit "train-lm --resume MT.tfm names a train-mt checkpoint" 2 \
    "--resume .*mt.tfm: is a translation model \(train-mt\), not a language model: continue it with tfm train-mt --resume" \
    "$TFM" train-lm --resume "$TMP/mt.tfm"
expect_exit "translate LM.tfm: use tfm generate" 65 "lm.tfm: is a language-model checkpoint \(train-lm.*use tfm generate" \
    "$TFM" translate "$TMP/lm.tfm"
expect_exit "attention LM.tfm: use tfm generate" 65 "use tfm generate" "$TFM" attention "$TMP/lm.tfm" --text hi --out "$TMP/a.svg"
expect_exit "generate MT.tfm: use tfm translate" 65 "mt.tfm: is a translation model \(train-mt.*use tfm translate" \
    "$TFM" generate "$TMP/mt.tfm" --prompt hi
"$TFM" export "$TMP/lm.tfm" --out "$TMP/lm.safetensors" >/dev/null 2>&1 || fail "export" "exit $?"
cp "$TMP/lm.safetensors" "$TMP/renamed.bin"
for cmd in "generate @M --prompt hi" "info @M" "train-lm --resume @M" "translate @M" "average -o @O @M @M"; do
    cmd=${cmd//@O/$TMP/avg.tfm}   # placeholders no temporary directory name contains
    expect_exit "${cmd%% *} given a safetensors file: use tfm import" 65 \
        "lm.safetensors: not a tfm checkpoint: a safetensors file\? convert it first: tfm import .*lm.safetensors --out MODEL.tfm" \
        "$TFM" ${cmd//@M/$TMP/lm.safetensors}
done
expect_exit "a safetensors file by its header, whatever its name" 65 "renamed.bin: not a tfm checkpoint: a safetensors file\?" \
    "$TFM" info "$TMP/renamed.bin"
printf 'TFMXjunkjunkjunk' >"$TMP/junk.tfm"
expect_exit "other junk: bad magic" 65 "junk.tfm: not a tfm file \(bad magic\)" "$TFM" info "$TMP/junk.tfm"
