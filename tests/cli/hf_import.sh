# tfm import DIR (issue 31): Hugging Face GPT-2 and MarianMT folders (tests/fixtures/hf_*_tiny, written by the
# PyTorch twins) run through generate / translate, and every kind of bad folder is refused with one line naming
# the file and the field or tensor, exit 65 (74: a file that cannot be opened), nothing written.
# (test_hf_import checks the imports' numbers against the twins.)
source "$(dirname "$0")/lib.bash"
cd "$(dirname "$0")/../.."
G=tests/fixtures/hf_gpt2_tiny
M=tests/fixtures/hf_marian_tiny

expect_ok "hf: import GPT-2" $TFM import $G --out "$TMP/g.tfm"
expect_ok "hf: generate with the imported GPT-2 (its BPE)" $TFM generate "$TMP/g.tfm" --prompt "Hello, world" --tokens 5 --temperature 0
head -c 12 "$TMP/out" | grep -q "Hello, world" && pass "hf: generate prints the prompt and continues" || fail "hf: generate output" "$(cat "$TMP/out")"
expect_ok "hf: import MarianMT" $TFM import $M --out "$TMP/m.tfm"
printf 'Ein Mann geht.\n\nZwei Hunde.\n' >"$TMP/de.txt"
if $TFM translate "$TMP/m.tfm" <"$TMP/de.txt" >"$TMP/en.txt" 2>"$TMP/err" && [ "$(wc -l <"$TMP/en.txt")" -eq 3 ]; then
    pass "hf: translate raw text with the imported MarianMT (its default beam, one line per line)"
else fail "hf: translate" "$(cat "$TMP/err")"; fi
expect_ok "hf: info on the imported translator" $TFM info "$TMP/m.tfm"
grep -q "attn_bias" "$TMP/out" && pass "hf: info shows the import's config fields" || fail "hf: info" "$(head -c 600 "$TMP/out")"

expect_exit "hf: safetensors export of an imported MarianMT is refused" 65 "an imported MarianMT: safetensors export" \
    $TFM export "$TMP/m.tfm" --out "$TMP/m.safetensors"
expect_exit "hf: tfm attention on an imported MarianMT is refused" 2 "an imported MarianMT: no word vocabulary" \
    $TFM attention "$TMP/m.tfm" --text "Ein Mann" --out "$TMP/a.svg"

# a copy of a fixture folder with one file changed; the import must fail naming it, and write nothing
bad() {   # bad NAME PATTERN SRC_DIR EDIT...   (EDIT runs in the copy)
    local name=$1 pattern=$2 src=$3; shift 3
    rm -rf "$TMP/bad" "$TMP/bad.tfm"; cp -r "$src" "$TMP/bad"
    (cd "$TMP/bad" && "$@")
    expect_exit "hf bad: $name" 65 "$pattern" $TFM import "$TMP/bad" --out "$TMP/bad.tfm"
    [ ! -e "$TMP/bad.tfm" ] || fail "hf bad: $name: nothing written" "$TMP/bad.tfm exists"
}
sub() { sed -i "$1" config.json; }
bad "config sizes disagree with the tensors" "tensor 'transformer.wte.weight' has shape \(512,32\) but .*config.json needs \(512,16\)" \
    $G sub 's/"n_embd": 32/"n_embd": 16/'
bad "more layers than the file has" "tensor 'transformer.h.2.ln_1.weight' missing" $G sub 's/"n_layer": 2/"n_layer": 3/'
bad "heads that do not divide the width" "config.json: 'n_head' \(5\) must divide 'n_embd' \(32\)" $G sub 's/"n_head": 4/"n_head": 5/'
bad "a vocabulary far beyond the file" "config.json: implies [0-9]+ parameters but .*model.safetensors holds only" \
    $G sub 's/"vocab_size": 512/"vocab_size": 16000000/'
bad "a field out of range" "config.json: 'n_layer' must be an integer in 1..256, got 100000" $G sub 's/"n_layer": 2/"n_layer": 100000/'
bad "an activation tfm does not compute" "config.json: 'activation_function' 'mish' is not supported" \
    $G sub 's/"gelu_new"/"mish"/'
bad "a model type tfm does not import" "config.json: 'model_type' 'bert' is not supported \(gpt2, marian\)" \
    $G sub 's/"model_type": "gpt2"/"model_type": "bert"/'
bad "invalid JSON" "config.json: invalid JSON at byte" $G sub 's/"n_layer": 2,/"n_layer": 2,,/'
bad "a truncated model.safetensors" "model.safetensors: .*(run past|truncated)" $G \
    bash -c 'head -c 100000 model.safetensors >t && mv t model.safetensors'
bad "a tensor the config does not describe" "tensor 'transformer.h.9.extra' is not part of the gpt2 model" $G \
    python3 -c '
import json, struct
b = open("model.safetensors", "rb").read(); n = struct.unpack("<Q", b[:8])[0]; h = json.loads(b[8:8 + n]); d = b[8 + n:]
h["transformer.h.9.extra"] = {"dtype": "F32", "shape": [1], "data_offsets": [len(d), len(d) + 4]}
s = json.dumps(h).encode(); s += b" " * (-(8 + len(s)) % 8)
open("model.safetensors", "wb").write(struct.pack("<Q", len(s)) + s + d + b"\0\0\0\0")'
bad "an untied lm_head" "tensor 'lm_head.weight' differs from 'transformer.wte.weight'" $G \
    python3 -c '
import json, struct
b = open("model.safetensors", "rb").read(); n = struct.unpack("<Q", b[:8])[0]; h = json.loads(b[8:8 + n]); d = b[8 + n:]
w = h["transformer.wte.weight"]; a, e = w["data_offsets"]
h["lm_head.weight"] = {"dtype": "F32", "shape": w["shape"], "data_offsets": [len(d), len(d) + e - a]}
s = json.dumps(h).encode(); s += b" " * (-(8 + len(s)) % 8)
open("model.safetensors", "wb").write(struct.pack("<Q", len(s)) + s + d + bytes(e - a))'
bad "no GPT-2 tokenizer" "no GPT-2 tokenizer \(vocab.json \+ merges.txt, or encoder.json \+ vocab.bpe\)" $G rm merges.txt
bad "a tokenizer with more ids than the model" "vocab.json: has ids up to 600 but config.json's vocab_size is 512" $G \
    sed -i 's/}$/,"extra": 600}/' vocab.json
bad "marian: encoder and decoder of different depths" "encoder and decoder differ \(layers 2/1" $M \
    sub 's/"decoder_layers": 2/"decoder_layers": 1/'
bad "marian: a bad_words_ids entry of two tokens" "'bad_words_ids': only single-token entries" $M \
    sub 's/"bad_words_ids": \[/"bad_words_ids": [[5, 6],/'
bad "marian: post-LN asked to be pre-LN" "'normalize_before' true is not supported" $M sub 's/"normalize_before": false/"normalize_before": true/'
bad "marian: a vocab.json that misses a piece" "bad/vocab.json: piece '.*' \(id [0-9]+ of .*bad/source.spm\) is missing" $M \
    python3 -c '
import json
v = json.load(open("vocab.json", encoding="utf-8")); del v[[k for k in v if k.startswith("\u2581")][0]]
json.dump(v, open("vocab.json", "w", encoding="utf-8"), ensure_ascii=False)'
bad "marian: separate vocabularies" "separate_vocabs true .* is not supported" $M \
    sed -i 's/"separate_vocabs": false/"separate_vocabs": true/' tokenizer_config.json
bad "marian: a shared embedding of the wrong width" "tensor 'model.shared.weight' has shape" $M sub 's/"d_model": 32/"d_model": 16/'

expect_exit "hf bad: no such folder" 74 "nope/: cannot open" $TFM import "$TMP/nope/" --out "$TMP/x.tfm"
rm -rf "$TMP/bad"; cp -r $M "$TMP/bad"; rm "$TMP/bad/target.spm"
expect_exit "hf bad: marian: a missing target.spm" 74 "bad/target.spm: cannot open" $TFM import "$TMP/bad" --out "$TMP/x.tfm"
[ ! -e "$TMP/x.tfm" ] && pass "hf bad: marian: a missing target.spm: nothing written" || fail "hf bad: nothing written" "x.tfm"

cp "$TMP/g.tfm" "$TMP/keep.tfm"; sum=$(sha256sum <"$TMP/keep.tfm")
rm -rf "$TMP/bad"; cp -r $G "$TMP/bad"; sed -i 's/"n_embd": 32/"n_embd": 16/' "$TMP/bad/config.json"
$TFM import "$TMP/bad" --out "$TMP/keep.tfm" 2>/dev/null
[ "$(sha256sum <"$TMP/keep.tfm")" = "$sum" ] && pass "hf bad: an existing --out is left as it was" \
    || fail "hf bad: an existing --out is left as it was" "changed"
