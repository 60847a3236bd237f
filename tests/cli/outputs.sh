# One guard for every writer (issue 33, finding 1): every command checks its files before any work
# (tfm_check_files). This test enumerates the commands of `tfm --help` (a command without a case here fails)
# and tries, for each command that writes a file, every output over every input (by name, through a
# symbolic link and a hard link), an output over another output, and the outputs that cannot be written
# (`--out ""`, a directory, a missing directory): each refused with one line before any work, the input
# unchanged. Before, export, import, plot, train-mt's --bpe-model and --dump-data replaced their input and
# exited 0, and `--out DIR` / `--out ""` of the trainers failed only at their first save.
source "$(dirname "$0")/lib.bash"
FRA=../shared/data/fra-eng/fra.txt
cd "$TMP" || exit 1
head -c 20000 "$OLDPWD/data/demo.txt" >text.txt
head -n 200 "$OLDPWD/$FRA" >pairs.tsv
cut -f1 pairs.tsv >src.txt; cut -f2 pairs.tsv >tgt.txt
LM="--n-layer 1 --n-head 2 --n-embd 16 --block-size 8 --batch-size 4 --eval-iters 1 --threads 1"
MT="--max-len 8 --d-model 8 --n-head 2 --n-layer 1 --ffn 8 --batch-size 32 --epochs 1 --threads 1"
$TFM train-lm --data text.txt --out lm.tfm $LM --iters 2 --eval-every 2 2>/dev/null
$TFM train-mt --tsv pairs.tsv --out mt.tfm $MT 2>/dev/null
$TFM export mt.tfm --out mt.safetensors 2>/dev/null
$TFM bpe learn --vocab-size 400 -o bpe.model src.txt tgt.txt 2>/dev/null
printf '{"step": 1, "loss": 3.5}\n{"step": 2, "loss": 3.0}\n' >log.jsonl
for f in lm.tfm mt.tfm mt.safetensors bpe.model; do [ -s $f ] || fail "fixture $f" "not written"; done
mkdir -p adir

# refused NAME CMD...: one line, exit 2 (an output over an input / another output), every file unchanged
refused() {
    local name=$1; shift
    md5sum ./*.* >sums 2>/dev/null
    expect_exit "$name" 2 "(is the input file|are the same file)" "$@"
    md5sum -c --quiet sums >/dev/null 2>&1 || fail "$name: inputs unchanged" "$(md5sum -c --quiet sums 2>&1 | head -n 2)"
}
# each way of naming the input: itself, a symbolic link to it, a hard link to it
as_link() { rm -f "$2"; case $3 in sym) ln -s "$1" "$2";; hard) ln "$1" "$2";; esac; }

cmds=$($TFM --help | awk '/^commands:/ { on = 1; next } on && NF { print $1 }')
[ "$(echo "$cmds" | wc -w)" -ge 13 ] && pass "tfm --help lists $(echo "$cmds" | wc -w) commands" || fail "command list" "$cmds"
for cmd in $cmds; do
    case $cmd in
    train-lm)
        refused "train-lm --out = --data" $TFM train-lm --data text.txt --out text.txt $LM
        as_link text.txt t-sym.txt sym
        refused "train-lm --out = --data (symbolic link)" $TFM train-lm --data text.txt --out t-sym.txt $LM
        refused "train-lm --log-file = --data" $TFM train-lm --data text.txt --out x.tfm --log-file text.txt $LM
        refused "train-lm --log-file = --out" $TFM train-lm --data text.txt --out x.tfm --log-file x.tfm $LM
        refused "train-lm --log-file = --resume" $TFM train-lm --resume lm.tfm --data text.txt --out x.tfm --log-file lm.tfm
        cp lm.tfm lm2.tfm
        expect_ok "train-lm --resume M --out M continues in place" $TFM train-lm --resume lm2.tfm --out ./lm2.tfm --iters 3
        ;;
    train-mt)
        for flag in tsv; do refused "train-mt --out = --$flag" $TFM train-mt --tsv pairs.tsv --out pairs.tsv $MT; done
        for side in src tgt; do
            refused "train-mt --out = --$side" $TFM train-mt --src src.txt --tgt tgt.txt --out $side.txt $MT
            refused "train-mt --out = --valid-$side" \
                $TFM train-mt --tsv pairs.tsv --valid-src src.txt --valid-tgt tgt.txt --out $side.txt $MT
        done
        refused "train-mt --out = --bpe-model" \
            $TFM train-mt --tsv pairs.tsv --tokenizer bpe --bpe-model bpe.model --out bpe.model $MT
        as_link bpe.model b-hard.model hard
        refused "train-mt --out = --bpe-model (hard link)" \
            $TFM train-mt --tsv pairs.tsv --tokenizer bpe --bpe-model bpe.model --out b-hard.model $MT
        refused "train-mt --log-file = --tsv" $TFM train-mt --tsv pairs.tsv --out x.tfm --log-file pairs.tsv $MT
        refused "train-mt --log-file = --out" $TFM train-mt --tsv pairs.tsv --out x.tfm --log-file x.tfm $MT
        cp src.txt d.train.src; cp tgt.txt d.train.tgt
        refused "train-mt --dump-data P over --src P.train.src" \
            $TFM train-mt --src d.train.src --tgt d.train.tgt --dump-data d --dump-only --out x.tfm $MT
        cp pairs.tsv d.src.vocab
        refused "train-mt --dump-data P over --tsv P.src.vocab" \
            $TFM train-mt --tsv d.src.vocab --dump-data d --dump-only --out x.tfm $MT
        cp src.txt k.best.tfm
        refused "train-mt --keep-best (OUT.best.tfm) over --valid-src" \
            $TFM train-mt --tsv pairs.tsv --valid-src k.best.tfm --valid-tgt tgt.txt --keep-best --out k.tfm $MT
        refused "train-mt --dump-data P.train.src = --log-file" \
            $TFM train-mt --tsv pairs.tsv --dump-data e --log-file e.train.src --out x.tfm $MT
        ;;
    attention)
        refused "attention --out = MODEL" $TFM attention mt.tfm --text "go ." --out mt.tfm
        as_link mt.tfm m-sym.tfm sym
        refused "attention --out = MODEL (symbolic link)" $TFM attention mt.tfm --text "go ." --out m-sym.tfm ;;
    export)
        refused "export --out = MODEL" $TFM export mt.tfm --out mt.tfm
        as_link mt.tfm m-hard.tfm hard
        refused "export --out = MODEL (hard link)" $TFM export mt.tfm --out m-hard.tfm ;;
    quantize)
        refused "quantize --out = MODEL" $TFM quantize mt.tfm --out mt.tfm
        as_link mt.tfm q-sym.tfm sym
        refused "quantize --out = MODEL (symbolic link)" $TFM quantize mt.tfm --out q-sym.tfm ;;
    import)
        refused "import --out = MODEL.safetensors" $TFM import mt.safetensors --out mt.safetensors
        as_link mt.safetensors s-sym.safetensors sym
        refused "import --out = MODEL.safetensors (symbolic link)" $TFM import mt.safetensors --out s-sym.safetensors ;;
    bpe)
        refused "bpe learn -o = TEXT (the second)" $TFM bpe learn --vocab-size 400 -o tgt.txt src.txt tgt.txt ;;
    average)
        cp mt.tfm mt-b.tfm
        refused "average -o = an input" $TFM average -o mt-b.tfm mt.tfm mt-b.tfm
        as_link mt.tfm a-sym.tfm sym
        refused "average -o = an input (symbolic link)" $TFM average -o a-sym.tfm mt.tfm mt-b.tfm ;;
    plot)
        refused "plot --out = LOG" $TFM plot log.jsonl --out log.jsonl
        as_link log.jsonl l-hard.jsonl hard
        refused "plot --out = LOG (hard link)" $TFM plot log.jsonl --out l-hard.jsonl ;;
    demo)
        mkdir -p d1/kernel_regression_fit.svg
        expect_exit "demo kernel-regression: an output that is a directory, refused before the demo runs" 2 \
            "kernel_regression_fit.svg is a directory" $TFM demo kernel-regression --out-dir d1 ;;
    generate|translate|info|bleu) pass "$cmd writes no file (standard output only)" ;;
    serve) pass "serve writes no file (it answers over HTTP; logs to stderr)" ;;
    *) fail "$cmd" "no case in tests/cli/outputs.sh: add how its outputs are checked against its inputs" ;;
    esac
done

# outputs that cannot be written, refused before any work (before: the trainers found them at their first save)
for out in '' adir missing/x.tfm; do
    case $out in '') want='--out: empty path'; st=2;; adir) want='--out adir is a directory'; st=2;;
                 *) want='cannot write missing/x.tfm: directory missing: No such file or directory'; st=74;; esac
    expect_exit "train-lm --out '$out' refused at start" $st "$want" $TFM train-lm --data text.txt --out "$out" $LM --iters 1000
    expect_exit "train-mt --out '$out' refused at start" $st "$want" $TFM train-mt --tsv pairs.tsv --out "$out" $MT --epochs 100
    expect_exit "export --out '$out' refused" $st "$want" $TFM export mt.tfm --out "$out"
    expect_exit "import --out '$out' refused" $st "$want" $TFM import mt.safetensors --out "$out"
    expect_exit "attention --out '$out' refused" $st "$want" $TFM attention mt.tfm --text "go ." --out "$out"
    expect_exit "plot --out '$out' refused" $st "$want" $TFM plot log.jsonl --out "$out"
done
expect_exit "train-lm --log-file DIR refused at start" 2 "--log-file adir is a directory" \
    $TFM train-lm --data text.txt --out x.tfm --log-file adir $LM --iters 1000
expect_exit "average -o '' refused" 2 "-o: empty path" $TFM average -o "" mt.tfm mt-b.tfm
expect_exit "bpe learn -o DIR refused" 2 "-o adir is a directory" $TFM bpe learn --vocab-size 400 -o adir src.txt
[ ! -e x.tfm ] && pass "no refused command wrote x.tfm" || fail "refused commands" "x.tfm written"
