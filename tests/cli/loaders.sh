# Corrupt and edited checkpoints end to end (issue 11): a flipped bit, absurd train.* values on
# --resume, a config that would allocate far more than the file holds, NaN weights, an edited
# meta.arch, config.max_len shorter than the resume's --max-len. Each is one line on stderr naming
# the file, non-zero exit, no crash. Edits go through scripts/tfmio.py (which rewrites the CRCs: a
# deliberate edit, not corruption); they need numpy, from /usr/bin/python3.
source "$(dirname "$0")/lib.bash"
PY=/usr/bin/python3
TINY="--n-layer 1 --n-head 2 --n-embd 16 --block-size 16 --batch-size 4 --eval-iters 2 --threads 1"
head -c 5000 data/demo.txt >"$TMP/small.txt"
$TFM train-lm --data "$TMP/small.txt" --out "$TMP/a.tfm" $TINY --iters 4 --eval-every 2 2>/dev/null \
    || fail "train-lm tiny checkpoint" "could not train"

# one flipped bit in the middle of the weights
python3 - "$TMP/a.tfm" "$TMP/flip.tfm" <<'PYEOF'
import sys
b = bytearray(open(sys.argv[1], 'rb').read())
b[len(b) // 2] ^= 0x08
open(sys.argv[2], 'wb').write(b)
PYEOF
expect_error "generate refuses a checkpoint with one flipped bit" "flip.tfm: entry '.*': checksum mismatch" \
    $TFM generate "$TMP/flip.tfm" --tokens 5
expect_error "train-lm --resume refuses a flipped bit" "flip.tfm.*checksum mismatch" \
    $TFM train-lm --data "$TMP/small.txt" --out "$TMP/flip.tfm" --resume "$TMP/flip.tfm"
expect_error "info refuses a flipped bit" "flip.tfm.*checksum mismatch" $TFM info "$TMP/flip.tfm"

if ! $PY -c 'import numpy' 2>/dev/null; then
    skip "checkpoint edits" "/usr/bin/python3 has no numpy"
    exit 0
fi
# edit SRC DST NAME=VALUE...: VALUE is an int, a float (with a dot, or nan/inf) or 'str:TEXT'; drop:PREFIX=1 removes
# entries (drop:run.=1: a file without the run configuration, as an imported or averaged one)
edit() {
    $PY - "$@" <<'PYEOF'
import sys; sys.path.insert(0, 'scripts')
import numpy as np, tfmio
d = tfmio.load(sys.argv[1])
for kv in sys.argv[3:]:
    k, v = kv.split('=', 1)
    if k.startswith('drop:'):                      # drop:PREFIX=1 removes the entries named PREFIX...
        d = {n: x for n, x in d.items() if not n.startswith(k[5:])}
    elif k.startswith('nan:'):                     # nan:ENTRY=INDEX puts a NaN into a weight
        k = k[4:]; a = d[k].copy(); a.flat[int(v)] = np.nan; d[k] = a
    elif v.startswith('str:'): d[k] = v[4:]
    elif any(c in v for c in '.naif'): d[k] = np.array([float(v)], np.float32)
    else: d[k] = np.array([int(v)], np.int32)
tfmio.save(sys.argv[2], d)
PYEOF
}
resume() { $TFM train-lm --data "$TMP/small.txt" --out "$1" --resume "$1" --threads 1; }
edit "$TMP/a.tfm" "$TMP/e.tfm" train.eval_every=0
expect_error "resume with train.eval_every 0 (was a division by zero)" "e.tfm: train.eval_every must be in 1\.\." resume "$TMP/e.tfm"
edit "$TMP/a.tfm" "$TMP/e.tfm" train.grad_accum=2147483647
expect_error "resume with train.grad_accum INT_MAX (was a hang)" "e.tfm: train.grad_accum" resume "$TMP/e.tfm"
edit "$TMP/a.tfm" "$TMP/e.tfm" train.eval_iters=2147483647
expect_error "resume with train.eval_iters INT_MAX (was a hang)" "e.tfm: train.eval_iters" resume "$TMP/e.tfm"
edit "$TMP/a.tfm" "$TMP/e.tfm" train.lr=-0.001
expect_error "resume with a negative train.lr" "e.tfm: train.lr" resume "$TMP/e.tfm"
edit "$TMP/a.tfm" "$TMP/e.tfm" train.beta1=-1.0
expect_error "resume with train.beta1 -1" "e.tfm: train.beta1" resume "$TMP/e.tfm"
edit "$TMP/a.tfm" "$TMP/e.tfm" config.n_embd=65536
expect_error "config.n_embd 65536: refused before allocating" "e.tfm: the config implies [0-9]+ parameters but the file holds" \
    $TFM generate "$TMP/e.tfm" --tokens 5
edit "$TMP/a.tfm" "$TMP/e.tfm" config.n_head=3
expect_error "config.n_head not dividing n_embd" "e.tfm: .*divisible" $TFM generate "$TMP/e.tfm" --tokens 5
edit "$TMP/a.tfm" "$TMP/e.tfm" nan:param.wte.weight=3
expect_error "NaN weight refused on load" "e.tfm: entry 'param\..*' holds a non-finite value" $TFM generate "$TMP/e.tfm" --tokens 5

# translators
printf 'go .\tva !\nhi .\tsalut .\nrun !\tcours !\n' >"$TMP/e.tsv"
MT="--d-model 8 --n-head 2 --n-layer 1 --ffn 8 --epochs 1 --batch-size 4 --min-freq 1 --threads 1 --log-every 0"
$TFM train-mt --tsv "$TMP/e.tsv" --out "$TMP/t.tfm" $MT --max-len 10 2>/dev/null || fail "train-mt tiny" "could not train"
edit "$TMP/t.tfm" "$TMP/t2.tfm" config.max_len=6
expect_error "train-mt --resume: config.max_len shorter than --max-len + 1 (was an abort)" \
    "t2.tfm: config.max_len 6 is shorter than (--max-len|run.max-len) 10" \
    $TFM train-mt --tsv "$TMP/e.tsv" $MT --max-len 10 --resume "$TMP/t2.tfm"
edit "$TMP/t.tfm" "$TMP/t2.tfm" config.d_model=65536 drop:run.=1
expect_error "config.d_model 65536: refused before allocating" "t2.tfm: the config implies" $TFM translate "$TMP/t2.tfm"
edit "$TMP/t.tfm" "$TMP/t2.tfm" config.d_model=65536
expect_error "config.d_model 65536 against the stored run configuration" "t2.tfm: config.d_model 65536 is not run.d-model 8" \
    $TFM translate "$TMP/t2.tfm"
MTR="--n-layer 1 --epochs 1 --batch-size 4 --min-freq 1 --threads 1 --log-every 0"
$TFM train-mt --tsv "$TMP/e.tsv" --out "$TMP/b.tfm" $MTR --arch bahdanau --embed-size 8 --hidden-size 8 2>/dev/null \
    || fail "train-mt tiny bahdanau" "could not train"
edit "$TMP/b.tfm" "$TMP/b2.tfm" meta.arch=str:rnn drop:run.=1
expect_error "meta.arch edited from bahdanau to rnn" "b2.tfm: entry 'param\.decoder\.attention\..*' is not a parameter" \
    $TFM translate "$TMP/b2.tfm"
edit "$TMP/b.tfm" "$TMP/b2.tfm" meta.arch=str:rnn
expect_error "meta.arch edited, against the stored run configuration" "b2.tfm: meta.arch 'rnn' is not run.arch 'bahdanau'" \
    $TFM translate "$TMP/b2.tfm"
edit "$TMP/b.tfm" "$TMP/b2.tfm" config.hidden_size=65536 drop:run.=1
expect_error "config.hidden_size 65536 (RNN constructor): refused before allocating" "b2.tfm: the config implies" \
    $TFM translate "$TMP/b2.tfm"
