# Issue 33: kills the attack campaign did not cover. SIGKILL and SIGINT at random moments during `bpe learn`,
# `export`, `import`, `average` and `plot` (each writes its output atomically: the output is afterwards either
# absent or complete, never a part; the next run of the command removes the killed run's temp file), and
# `train-mt --parallel batch` / `train-lm --parallel ops` with 2 threads killed with SIGKILL several times and
# resumed each time: the final checkpoint equals the uninterrupted run's, byte for byte.
source "$(dirname "$0")/lib.bash"
FRA=../shared/data/fra-eng/fra.txt
head -c 100000 ../shared/data/tinyshakespeare/input.txt >"$TMP/ts.txt"
head -n 20000 "$FRA" | cut -f1,2 | tr '\t' '\n' >"$TMP/corpus.txt"
awk 'BEGIN { for (i = 0; i < 40000; i++) printf "{\"event\": \"train\", \"step\": %d, \"loss\": %.4f, \"lr\": 0.001}\n", i, 5 - i * 1e-4 }' \
    >"$TMP/log.jsonl"
$TFM train-lm --data "$TMP/ts.txt" --out "$TMP/m.tfm" --n-layer 4 --n-head 4 --n-embd 128 --block-size 16 --batch-size 2 \
    --iters 2 --eval-every 1 --eval-iters 1 --threads 2 2>/dev/null
$TFM train-lm --resume "$TMP/m.tfm" --out "$TMP/m2.tfm" --iters 3 2>/dev/null
$TFM export "$TMP/m.tfm" --out "$TMP/m.st" 2>/dev/null
[ -s "$TMP/m.st" ] && [ -s "$TMP/m2.tfm" ] || fail "kill fixtures" "not written"

# killed NAME OUT CMD...: the reference output first (a clean run), then runs killed at a random moment within the
# clean run's duration (SIGKILL, SIGINT alternately): 4, or up to 12 until one is killed before it finishes (a run of
# 25 ms is often over before the kill lands); after each, OUT is absent or equal to the reference; a last clean run
# leaves no OUT.tmp.* behind and writes the reference again
killed() {
    local name=$1 out=$2; shift 2
    local t0 t1 ms bad="" k=0 sig hit=0 delay
    rm -f "$out"
    t0=$(date +%s%N); "$@" >/dev/null 2>&1; t1=$(date +%s%N)
    cp "$out" "$TMP/ref" 2>/dev/null || { fail "$name" "the clean run wrote no $out"; return; }
    ms=$(( (t1 - t0) / 1000000 + 1 ))
    while [ $k -lt 4 ] || { [ $hit -eq 0 ] && [ $k -lt 12 ]; }; do
        k=$((k + 1))
        rm -f "$out"
        sig=KILL; [ $((k % 2)) -eq 0 ] && sig=INT
        delay=$(awk -v ms="$ms" -v r="$RANDOM" 'BEGIN { printf "%.3f", ms * (r % 1000) / 1000 / 1000 }')   # before the start
        env --default-signal=INT "$@" >/dev/null 2>&1 &   # a background job of a script starts with SIGINT ignored
        local pid=$!
        sleep "$delay"
        kill -"$sig" $pid 2>/dev/null; wait $pid 2>/dev/null
        [ $? -ge 128 ] && hit=$((hit + 1))   # killed before it finished
        if [ -e "$out" ] && ! cmp -s "$out" "$TMP/ref"; then bad="$bad $sig@$k"; fi
    done
    "$@" >/dev/null 2>&1
    local left; left=$(ls "$(dirname "$out")" | grep -c "^$(basename "$out").tmp\." || true)
    if [ -z "$bad" ] && [ "$left" -eq 0 ] && [ $hit -ge 1 ] && cmp -s "$out" "$TMP/ref"; then
        pass "$name: $hit of $k runs killed mid-way (SIGKILL, SIGINT): the output absent or complete, no temp file left"
    else
        fail "$name" "partial output after:${bad:- none}; $left temp files left; $hit of $k runs killed mid-way (of ${ms} ms)"
    fi
}
killed "bpe learn" "$TMP/b.model" $TFM bpe learn --vocab-size 4000 -o "$TMP/b.model" "$TMP/corpus.txt"
killed "export" "$TMP/x.st" $TFM export "$TMP/m.tfm" --out "$TMP/x.st"
killed "import" "$TMP/x.tfm" $TFM import "$TMP/m.st" --out "$TMP/x.tfm"
killed "average" "$TMP/a.tfm" $TFM average -o "$TMP/a.tfm" "$TMP/m.tfm" "$TMP/m2.tfm"
killed "plot" "$TMP/p.svg" $TFM plot "$TMP/log.jsonl" --out "$TMP/p.svg"

# resumed NAME OUT "RESUME FLAGS" CMD...: the uninterrupted run to OUT.full, then the run to OUT killed (SIGKILL) 4
# times at random moments and resumed (--resume OUT and the flags a resume may not take from the checkpoint: the
# threads and how they share a step, which change the bits) each time, then finished: OUT == OUT.full byte for byte
resumed() {
    local name=$1 out=$2 again=$3 cmd=$4; shift 4
    local t0 t1 ms k pid hit=0
    t0=$(date +%s%N)
    $TFM "$cmd" "$@" --out "$out.full" 2>/dev/null
    t1=$(date +%s%N)
    ms=$(((t1 - t0) / 1000000))   # the kills land at 5-20% of the whole run's time each, so all four fall inside it
    for k in 1 2 3 4; do
        if [ -f "$out" ]; then $TFM "$cmd" --resume "$out" $again >/dev/null 2>&1 & else $TFM "$cmd" "$@" --out "$out" >/dev/null 2>&1 & fi
        pid=$!
        sleep "$(awk -v ms="$ms" -v r=$RANDOM 'BEGIN { printf "%.3f", ms * (0.05 + 0.15 * r / 32768) / 1000 }')"
        kill -KILL $pid 2>/dev/null; wait $pid 2>/dev/null
        [ $? -eq 137 ] && hit=$((hit + 1))
    done
    if [ -f "$out" ]; then $TFM "$cmd" --resume "$out" $again >/dev/null 2>&1; else $TFM "$cmd" "$@" --out "$out" >/dev/null 2>&1; fi
    [ $hit -ge 2 ] && cmp -s "$out" "$out.full" \
        && pass "$name: $hit x SIGKILL mid-run + --resume == the uninterrupted run, byte for byte" \
        || fail "$name" "$hit kills mid-run (a run: $ms ms); checkpoints equal: $(cmp -s "$out" "$out.full" && echo yes || echo no)"
}
resumed "train-mt --parallel batch, 2 threads" "$TMP/mt.tfm" "--threads 2 --parallel batch" train-mt --tsv "$FRA" \
    --num-examples 1000 --max-len 10 --d-model 32 --n-head 2 --n-layer 1 --ffn 32 --batch-size 32 --epochs 3 --dropout 0.1 \
    --threads 2 --parallel batch \
    --save-every 1 --log-every 0
resumed "train-lm --parallel ops, 2 threads" "$TMP/lm.tfm" "--threads 2 --parallel ops" train-lm --data "$TMP/ts.txt" \
    --n-layer 2 --n-head 2 --n-embd 32 --block-size 32 --batch-size 8 --iters 60 --eval-every 30 --eval-iters 2 --dropout 0.1 --threads 2 \
    --parallel ops --save-every 1 --log-every 0
