# tfm export / tfm import: round trips through the CLI (a trained LM with optimizer state, a trained
# translator), the imported model behaves like the original, and bad input is one line naming the file.
source "$(dirname "$0")/lib.bash"
head -c 20000 data/demo.txt >"$TMP/small.txt"
$TFM train-lm --data "$TMP/small.txt" --out "$TMP/lm.tfm" --n-layer 1 --n-head 2 --n-embd 16 --block-size 16 \
    --batch-size 4 --iters 10 --eval-every 10 --eval-iters 1 --threads 2 2>/dev/null

expect_ok "export a trained LM (with optimizer state)" $TFM export "$TMP/lm.tfm" --out "$TMP/lm.safetensors"
expect_ok "import it" $TFM import "$TMP/lm.safetensors" --out "$TMP/lm2.tfm"
$TFM info "$TMP/lm2.tfm" | grep -q "weights only" && pass "imported LM is a weights-only checkpoint" \
    || fail "imported LM is a weights-only checkpoint" "$($TFM info "$TMP/lm2.tfm")"
$TFM export "$TMP/lm2.tfm" --out "$TMP/lm2.safetensors" 2>/dev/null
cmp -s "$TMP/lm.safetensors" "$TMP/lm2.safetensors" && pass "LM export -> import -> export: same bytes" \
    || fail "LM export -> import -> export: same bytes" "files differ"
$TFM generate "$TMP/lm.tfm" --prompt "ROMEO:" --tokens 60 --seed 5 >"$TMP/g1" 2>/dev/null
$TFM generate "$TMP/lm2.tfm" --prompt "ROMEO:" --tokens 60 --seed 5 >"$TMP/g2" 2>/dev/null
[ -s "$TMP/g1" ] && cmp -s "$TMP/g1" "$TMP/g2" && pass "imported LM generates the same text" \
    || fail "imported LM generates the same text" "outputs differ"

printf 'go .\tva !\nhi .\tsalut .\nrun !\tcours !\nwho ?\tqui ?\nwow !\tca alors !\n' >"$TMP/p.tsv"
for arch in transformer rnn bahdanau; do
    case $arch in transformer) sizes="--d-model 8 --n-head 2 --ffn 8";; *) sizes="--embed-size 4 --hidden-size 6";; esac
    $TFM train-mt --tsv "$TMP/p.tsv" --out "$TMP/$arch.tfm" --arch $arch $sizes --n-layer 1 \
        --epochs 2 --batch-size 2 --min-freq 1 --threads 1 --log-every 0 2>/dev/null
    $TFM export "$TMP/$arch.tfm" --out "$TMP/$arch.st" 2>/dev/null && $TFM import "$TMP/$arch.st" --out "$TMP/$arch.2.tfm" \
        && $TFM export "$TMP/$arch.2.tfm" --out "$TMP/$arch.2.st" && cmp -s "$TMP/$arch.st" "$TMP/$arch.2.st" \
        && pass "$arch translator: export -> import -> export, same bytes" \
        || fail "$arch translator: export -> import -> export, same bytes" "failed or differs"
    printf 'go .\nwho ?\n' | $TFM translate "$TMP/$arch.tfm" >"$TMP/t1" 2>/dev/null
    printf 'go .\nwho ?\n' | $TFM translate "$TMP/$arch.2.tfm" >"$TMP/t2" 2>/dev/null
    [ -s "$TMP/t1" ] && cmp -s "$TMP/t1" "$TMP/t2" && pass "$arch: imported translator translates the same" \
        || fail "$arch: imported translator translates the same" "outputs differ"
done

# BPE translators (raw text, joint model) with and without tied embeddings: export -> import gives the same
# checkpoint entries (tfm info lists them with their checksums) and the same translations.
for tied in "" --share-embeddings; do
    n=bpe${tied:+-tied}
    $TFM train-mt --tsv "$TMP/p.tsv" --out "$TMP/$n.tfm" --tokenizer bpe --vocab-size 290 ${tied:---share-embeddings=0} --d-model 8 --n-head 2 \
        --n-layer 1 --ffn 8 --epochs 2 --batch-size 2 --threads 1 --log-every 0 2>/dev/null
    $TFM export "$TMP/$n.tfm" --out "$TMP/$n.st" 2>/dev/null && $TFM import "$TMP/$n.st" --out "$TMP/$n.2.tfm" \
        && $TFM export "$TMP/$n.2.tfm" --out "$TMP/$n.2.st" && cmp -s "$TMP/$n.st" "$TMP/$n.2.st" \
        && pass "$n translator: export -> import -> export, same bytes" \
        || fail "$n translator: export -> import -> export, same bytes" "failed or differs"
    grep -q '"tfm.tokenizer.bpe":"' "$TMP/$n.st" && { [ -z "$tied" ] || grep -q '"tfm.tied_weights":' "$TMP/$n.st"; } \
        && pass "$n: the export carries the BPE model${tied:+ and the tied layout}" || fail "$n: export metadata" "missing"
    printf 'go .\nwho ?\nwow, run !\n' | $TFM translate "$TMP/$n.tfm" >"$TMP/t1" 2>/dev/null
    printf 'go .\nwho ?\nwow, run !\n' | $TFM translate "$TMP/$n.2.tfm" >"$TMP/t2" 2>/dev/null
    [ -s "$TMP/t1" ] && cmp -s "$TMP/t1" "$TMP/t2" && pass "$n: imported translator translates the same" \
        || fail "$n: imported translator translates the same" "outputs differ"
done
sed 's/"tfm.tokenizer.bpe":"./"tfm.tokenizer.bpe":"%/' "$TMP/bpe.st" >"$TMP/badbpe.st"
expect_error "import: malformed BPE metadata names the file and the field" "badbpe.st: tfm.tokenizer.bpe: not base64" \
    $TFM import "$TMP/badbpe.st" --out "$TMP/x.tfm"

# Bad input: one line naming the file (and the tensor), non-zero exit, --out not written or left untouched.
S="$TMP/lm.safetensors"
head -c 3000 "$S" >"$TMP/trunc.st"
expect_error "import: truncated file" "trunc.st: (header length .* runs past the end|tensor '.*': data_offsets .* run past)" \
    $TFM import "$TMP/trunc.st" --out "$TMP/x.tfm"
[ ! -e "$TMP/x.tfm" ] && pass "import: nothing written on error" || fail "import: nothing written on error" "x.tfm exists"
head -c $(( $(stat -c %s "$S") - 4 )) "$S" >"$TMP/short.st"
expect_error "import: file cut in the data names the last tensor" "short.st: tensor 'ln_f.bias': data_offsets .* run past the data buffer" \
    $TFM import "$TMP/short.st" --out "$TMP/x.tfm"
printf '\xff\xff\xff\xff\xff\xff\x00\x00{}' >"$TMP/huge.st"
expect_error "import: huge header length" "huge.st: header length [0-9]+ exceeds" $TFM import "$TMP/huge.st" --out "$TMP/x.tfm"
echo keep >"$TMP/keep.tfm"
sed 's/"F32"/"F64"/' "$S" >"$TMP/f64.st"
expect_error "import: wrong dtype" "f64.st: tensor '[a-z_.0-9]+': dtype 'F64' not supported" \
    $TFM import "$TMP/f64.st" --out "$TMP/keep.tfm"
[ "$(cat "$TMP/keep.tfm")" = keep ] && pass "import: an existing --out is left untouched on error" \
    || fail "import: an existing --out is left untouched on error" "changed"
expect_error "import: not a safetensors file" "small.txt: header length" $TFM import "$TMP/small.txt" --out "$TMP/x.tfm"
expect_error "import: --out missing" "--out is required" $TFM import "$S"
expect_error "export: missing checkpoint" "nope.tfm: cannot open" $TFM export "$TMP/nope.tfm" --out "$TMP/x.st"
expect_error "export: a reference fixture is not a model checkpoint" "gpt_small.tfm: entry 'meta.kind' missing" \
    $TFM export tests/fixtures/gpt_small.tfm --out "$TMP/x.st"
[ ! -e "$TMP/x.st" ] && pass "export: nothing written on error" || fail "export: nothing written on error" "x.st exists"
expect_error "export: unwritable --out" "cannot write" $TFM export "$TMP/lm.tfm" --out /nonexistent/dir/x.st
