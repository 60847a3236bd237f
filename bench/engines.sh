#!/usr/bin/env bash
# tfm beside the inference engines people deploy (issue 34): ONNX Runtime (onnxruntime-node) for translation and
# llama.cpp (node-llama-cpp) for generation, on the same weights, the same machine, in alternating rounds.
# Benchmarks only, never part of make test (needs npm packages and torch; --quick checks it runs end to end).
#
#   bench/engines.sh [--mt MODEL.tfm] [--src FILE] [--sentences N] [--gpt MODEL.tfm]... [--gpt2-small]
#                    [--rounds N] [--tokens N] [--threads "1 2"] [--work DIR] [--quick]
#
# --mt        a Transformer translator with a BPE tokenizer (the Multi30k recipe's model.avg.tfm, one model: its
#             model.tfm is a stored ensemble, which export refuses); --src its test
#             sources (default ../shared/data/multi30k/test_2016_flickr.de), the first --sentences of them.
#             1. exported to ONNX through the PyTorch twin (bench/engines/onnx_export.py: an encoder graph and a
#                decoder-step graph with the past keys/values as inputs and outputs, Optimum-style);
#             2. decoded by ONNX Runtime in Node (bench/engines/ort_decode.mjs: tfm's search, greedy and beam 4,
#                the same length penalty (the model's stored alpha, passed to both) and limits), tokenized by tfm
#                on both sides (tfm bpe encode/decode --ids); the outputs compared with tfm translate's, sentence
#                for sentence;
#             3. timed: greedy at batch 1 and batch 32, beam 4 at batch 32; tfm at each --threads (and int8: the
#                model through tfm quantize), ORT with graph optimisation all/extended/basic, intra-op threads
#                1..max(--threads), inter-op 1, and, for 2 threads, two single-thread ORT processes on halves.
# --gpt       GPT checkpoints (e.g. the tinyshakespeare baby model); --gpt2-small adds a random GPT of GPT-2 small's
#             shape (12 layers, 12 heads, width 768, context 1024; tinyshakespeare's characters as vocabulary).
#             Exported with `tfm export MODEL --format gguf --out X.gguf [--outtype q8_0]` (F32 and Q8_0); tfm
#             generate (fp32 and int8) against llama.cpp (bench/engines/llama_gen.mjs) generating --tokens after a
#             fixed prompt, greedy, at each thread count, llama.cpp batch 512 and 32. Then tfm int8 over fp32 in
#             one process, warm, in 5 x --rounds alternating rounds (build/bench/gen_pair, from make bench-bin).
# --rounds    alternating rounds (every configuration once a round, in an order shuffled by the round's number;
#             medians at the end; default 5)
# --quick     a functional run: few sentences and tokens, 1 round (no numbers to quote)
#
# tfm is timed as a whole process (load, tokenize, decode, detokenize: conservative for tfm); ORT on decoding
# only (sessions created before the clock starts), llama.cpp on generation after the prompt. A second table
# times tfm like ORT: the same command on the first sentence alone is subtracted ((n - 1) / (T_n - T_1)). The engines are
# installed here by `npm install --ignore-scripts` (bench/engines/package.json: onnxruntime-node 1.30.0,
# node-llama-cpp 3.22.1 with @node-llama-cpp/linux-x64) into bench/engines/node_modules (git-ignored).
# Needs node/npm, /usr/bin/python3 with torch (Debian python3-torch). Run it on a quiet machine.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
E=$here/bench/engines
TFM=${TFM:-$here/build/tfm}
PY=${PYTHON:-/usr/bin/python3}
mt="" src="" sentences=0 gpts=() gpt2=0 rounds=5 tokens=256 threads="1 2" work="" quick=0
while [ $# -gt 0 ]; do
    case $1 in
        --mt) mt=$2; shift 2;;
        --src) src=$2; shift 2;;
        --sentences) sentences=$2; shift 2;;
        --gpt) gpts+=("$2"); shift 2;;
        --gpt2-small) gpt2=1; shift;;
        --rounds) rounds=$2; shift 2;;
        --tokens) tokens=$2; shift 2;;
        --threads) threads=$2; shift 2;;
        --work) work=$2; shift 2;;
        --quick) quick=1; shift;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0;;
        *) echo "bench/engines.sh: unknown option '$1' (see --help)" >&2; exit 2;;
    esac
done
die() { echo "bench/engines.sh: $*" >&2; exit 1; }
[ -n "$mt" ] || [ ${#gpts[@]} -gt 0 ] || [ $gpt2 = 1 ] || die "nothing to compare: give --mt MODEL.tfm and/or --gpt MODEL.tfm / --gpt2-small"
if [ $quick = 1 ]; then rounds=1; [ "$sentences" -gt 0 ] || sentences=16; tokens=32; fi
[ -x "$TFM" ] || make -C "$here" --no-print-directory -j2 build/tfm >/dev/null
[ -n "$work" ] || work=$(mktemp -d)
mkdir -p "$work"
max_threads=1; for t in $threads; do [ "$t" -gt "$max_threads" ] && max_threads=$t; done

echo "# bench/engines.sh $(date -u +%Y-%m-%dT%H:%MZ) tfm $($TFM --version | cut -d' ' -f2) ($(git -C "$here" log -1 --format=%h 2>/dev/null || echo '?'));" \
     "loadavg $(cut -d' ' -f1-3 /proc/loadavg); rounds $rounds"
bash "$here/bench/sysinfo.sh" 2>/dev/null | grep '^# CPU' || true
first=${mt:-${gpts[0]:-}}
[ -n "$first" ] && echo "# tfm $($TFM info "$first" | grep '^kernels here')"

# ---------------------------------------------------------------- engines
install_engines() {
    if [ ! -d "$E/node_modules/onnxruntime-node" ] || [ ! -d "$E/node_modules/node-llama-cpp" ]; then
        command -v npm >/dev/null || die "npm missing (Debian: apt-get install npm)"
        echo "# installing onnxruntime-node 1.30.0, node-llama-cpp 3.22.1 into $E/node_modules (scripts disabled)"
        (cd "$E" && ONNXRUNTIME_NODE_INSTALL=skip npm install --ignore-scripts --no-audit --no-fund >/dev/null) \
            || die "npm install failed in $E"
    fi
    echo "# $(node -e "console.log('onnxruntime-node', require('$E/node_modules/onnxruntime-node/package.json').version, \
        '| node-llama-cpp', require('$E/node_modules/node-llama-cpp/package.json').version)") | $(cd "$E" && node llama_gen.mjs --probe)"
}
install_engines

# time_cmd OUTFILE CMD...: runs CMD, appends its wall seconds to OUTFILE
time_cmd() {
    local f=$1; shift
    local t0 t1
    t0=$(date +%s.%N)
    "$@"
    t1=$(date +%s.%N)
    awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.4f\n", b - a }' >>"$f"
}
# round_order N R: 0..N-1 in round R's order, shuffled with R as the seed (the same order for the same R on every run):
# a configuration does not always follow the same one (after ORT's two processes a tfm run was ~1.3x slower:
# bench/results/engines_mt_2026-11-28_xeon_order.txt)
round_order() { awk -v n="$1" -v r="$2" 'BEGIN { srand(r); for (i = 0; i < n; i++) o[i] = i
    for (i = n - 1; i > 0; i--) { j = int(rand() * (i + 1)); t = o[i]; o[i] = o[j]; o[j] = t }
    for (i = 0; i < n; i++) print o[i] }'; }
# median of the numbers in a file
median() { sort -g "$1" | awk '{ v[NR] = $1 } END { if (NR == 0) print "nan"; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# ---------------------------------------------------------------- translation: tfm vs ONNX Runtime
mt_compare() {
    local W=$work/mt
    mkdir -p "$W/times"
    src=${src:-$here/../shared/data/multi30k/test_2016_flickr.de}
    [ -r "$src" ] || die "$src: not readable (--src FILE)"
    if [ "$sentences" -gt 0 ]; then head -n "$sentences" "$src" >"$W/src.txt"; else cp "$src" "$W/src.txt"; fi
    local n; n=$(wc -l <"$W/src.txt")
    $TFM bpe encode --ids --model "$mt" <"$W/src.txt" >"$W/src.ids" 2>"$W/err" \
        || die "tfm bpe encode --ids --model $mt: $(cat "$W/err") (the ONNX comparison needs a translator with a BPE tokenizer)"
    "$PY" "$E/onnx_export.py" "$mt" "$W/onnx" | sed 's/^/# /'
    $TFM quantize "$mt" --out "$W/int8.tfm" >/dev/null 2>&1 || die "tfm quantize $mt failed"
    # the same search on both sides, explicitly: the model's stored length penalty (what tfm translate uses when
    # --alpha is not given; ort_decode.mjs reads it from model.json), --max-output 50, --max-src 200 (the defaults)
    local alpha
    alpha=$(node -p "require('$W/onnx/model.json').decode_alpha ?? 0") || die "$W/onnx/model.json: no decode_alpha"
    echo "# search: alpha $alpha (the model's decode.alpha), --max-output 50, --max-src 200, on both sides"
    # the same outputs? greedy and beam 4
    local beam ident
    for beam in 1 4; do
        $TFM translate "$mt" --beam $beam --alpha "$alpha" --threads 1 <"$W/src.txt" >"$W/tfm.$beam.txt" 2>/dev/null
        (cd "$E" && node ort_decode.mjs "$W/onnx" "$W/src.ids" "$W/ort.$beam.ids" --beam $beam --alpha "$alpha" 2>/dev/null)
        $TFM bpe decode --ids --model "$mt" <"$W/ort.$beam.ids" >"$W/ort.$beam.txt"
        ident=$(paste -d '\t' "$W/tfm.$beam.txt" "$W/ort.$beam.txt" | awk -F'\t' '$1 == $2' | wc -l)
        echo "outputs, $([ $beam = 1 ] && echo greedy || echo "beam $beam"): tfm and ONNX Runtime identical for $ident of $n sentences"
        $TFM translate "$W/int8.tfm" --beam $beam --alpha "$alpha" --threads 1 <"$W/src.txt" >"$W/int8.$beam.txt" 2>/dev/null
        ident=$(paste -d '\t' "$W/tfm.$beam.txt" "$W/int8.$beam.txt" | awk -F'\t' '$1 == $2' | wc -l)
        echo "outputs, $([ $beam = 1 ] && echo greedy || echo "beam $beam"): tfm int8 equal to tfm fp32 for $ident of $n sentences (quality: docs/INT8.md)"
    done
    # the configurations: NAME|COMMAND (run from $E; timed whole, except ORT which reports its decoding time)
    local cfgs=() mode b beamk t opt intra
    for mode in greedy1 greedy32 beam4; do
        case $mode in greedy1) b=1 beamk=1;; greedy32) b=32 beamk=1;; beam4) b=32 beamk=4;; esac
        for t in $threads; do
            cfgs+=("$mode|tfm fp32 threads $t|tfm $mt --beam $beamk --alpha $alpha --batch-size $b --threads $t")
            cfgs+=("$mode|tfm fp32 threads $t start-up|tfm1 $mt --beam $beamk --alpha $alpha --batch-size $b --threads $t")
            cfgs+=("$mode|tfm int8 threads $t|tfm $W/int8.tfm --beam $beamk --alpha $alpha --batch-size $b --threads $t")
        done
        for opt in all extended basic; do
            for intra in $(seq 1 "$max_threads"); do
                cfgs+=("$mode|ort $opt intra $intra inter 1|ort --beam $beamk --alpha $alpha --batch-size $b --opt $opt --intra $intra --inter 1")
            done
        done
        [ "$max_threads" -ge 2 ] && cfgs+=("$mode|ort all 2 processes x intra 1|ort2 --beam $beamk --alpha $alpha --batch-size $b --opt all --intra 1 --inter 1")
    done
    head -n $(( (n + 1) / 2 )) "$W/src.ids" >"$W/half1.ids"; tail -n +$(( (n + 1) / 2 + 1 )) "$W/src.ids" >"$W/half2.ids"
    head -n 1 "$W/src.txt" >"$W/one.txt"   # tfm's start-up: the same command on one sentence
    local r i c name cmd f
    for r in $(seq "$rounds"); do
        for i in $(round_order ${#cfgs[@]} "$r"); do
            IFS='|' read -r mode name cmd <<<"${cfgs[$i]}"
            f="$W/times/$i"
            set -- $cmd
            case $1 in
                tfm) shift; time_cmd "$f" $TFM translate "$@" <"$W/src.txt" >"$W/out.txt" 2>/dev/null;;
                tfm1) shift; time_cmd "$f" $TFM translate "$@" <"$W/one.txt" >"$W/out.txt" 2>/dev/null;;
                ort) shift; (cd "$E" && node ort_decode.mjs "$W/onnx" "$W/src.ids" "$W/out.ids" "$@") 2>&1 \
                        | sed -n 's/^ort: [0-9]* sentences in \([0-9.]*\) s.*/\1/p' >>"$f";;
                ort2) shift; (cd "$E" && { node ort_decode.mjs "$W/onnx" "$W/half1.ids" "$W/o1.ids" "$@" 2>"$W/e1" &
                                           node ort_decode.mjs "$W/onnx" "$W/half2.ids" "$W/o2.ids" "$@" 2>"$W/e2"; wait; })
                      cat "$W/e1" "$W/e2" | sed -n 's/^ort: [0-9]* sentences in \([0-9.]*\) s.*/\1/p' | sort -g | tail -n 1 >>"$f";;
            esac
        done
    done
    echo "translation: $n sentences of $(basename "$src"), sentences/s (median of $rounds rounds, min-max)"
    printf '  %-9s %-34s %10s %22s\n' mode configuration "median" "range"
    for i in "${!cfgs[@]}"; do
        IFS='|' read -r mode name cmd <<<"${cfgs[$i]}"
        f="$W/times/$i"
        case $cmd in tfm1\ *) continue;; esac
        printf '  %-9s %-34s %10.1f %22s\n' "$mode" "$name" "$(awk -v n="$n" -v s="$(median "$f")" 'BEGIN { print n / s }')" \
            "$(sort -g "$f" | awk -v n="$n" 'NR == 1 { hi = n / $1 } { lo = n / $1 } END { printf "%.1f-%.1f", lo, hi }')"
    done | tee "$W/table.txt"
    for mode in greedy1 greedy32 beam4; do
        awk -v m="$mode" '$1 == m { sub(/^ +/, ""); v = $(NF - 1); if ($2 == "tfm" && $3 == "fp32" && v > t) t = v; if ($2 == "ort" && v > o) o = v }
             END { if (o > 0) printf "  %s: tfm fp32 best %.1f / ONNX Runtime best %.1f = %.2fx\n", m, t, o, t / o }' "$W/table.txt"
    done
    # like for like: ORT's times exclude its start-up (sessions created before the clock), tfm's include it. The
    # same tfm command on the first sentence alone is its start-up plus that sentence: (n - 1) / (T_n - T_1)
    echo "tfm timed like ORT, start-up excluded: (n - 1) sentences / (median time of the n - median time of the first alone):"
    for i in "${!cfgs[@]}"; do
        IFS='|' read -r mode name cmd <<<"${cfgs[$i]}"
        case $cmd in tfm1\ *) ;; *) continue;; esac
        local whole=$((i - 1))
        printf '  %-9s %-34s %10.1f   (start-up %.3f s)\n' "$mode" "${name% start-up}, decoding" \
            "$(awk -v n="$n" -v a="$(median "$W/times/$whole")" -v b="$(median "$W/times/$i")" 'BEGIN { print (n - 1) / (a - b) }')" \
            "$(median "$W/times/$i")"
    done | tee "$W/table_dec.txt"
    for mode in greedy1 greedy32 beam4; do
        awk -v m="$mode" 'FNR == 1 { file++ } $1 == m { sub(/^ +/, "") }
             file == 1 && $1 == m && $2 == "ort" { v = $(NF - 1); if (v > o) o = v }
             file == 2 && $1 == m { v = $(NF - 3); if (v > t) t = v }
             END { if (o > 0) printf "  %s: tfm fp32 best, decoding %.1f / ONNX Runtime best %.1f = %.2fx\n", m, t, o, t / o }' \
            "$W/table.txt" "$W/table_dec.txt"
    done
}

# ---------------------------------------------------------------- generation: tfm vs llama.cpp
gguf_available() { $TFM export --help 2>&1 | grep -q -- '--format'; }
gpt_compare() {
    local W=$work/gpt
    mkdir -p "$W/times"
    if [ $gpt2 = 1 ]; then
        echo "# a random GPT of GPT-2 small's shape (one training step from tfm's init on tinyshakespeare)"
        $TFM train-lm --data "$here/../shared/data/tinyshakespeare/input.txt" --out "$W/gpt2-small.tfm" --overwrite --iters 1 \
            --n-layer 12 --n-head 12 --n-embd 768 --block-size 1024 --batch-size 1 --eval-every 100 --eval-iters 1 \
            --threads "$max_threads" >/dev/null 2>&1 || die "could not make the GPT-2-small-shaped model"
        gpts+=("$W/gpt2-small.tfm")
    fi
    if ! gguf_available; then
        echo "llama.cpp comparison: SKIPPED: this tfm has no 'tfm export --format gguf' (the GGUF exporter of issue" \
             "'Run the models people already have'; merge it, then rerun). The tfm side alone:"
    fi
    local cfgs=() m k t q batch prompt="ROMEO:"
    for k in "${!gpts[@]}"; do
        m=${gpts[$k]}
        $TFM quantize "$m" --out "$W/m$k.int8.tfm" >/dev/null 2>&1 || die "tfm quantize $m failed"
        for t in $threads; do
            cfgs+=("$k|tfm fp32 threads $t|tfm $m $t")
            cfgs+=("$k|tfm int8 threads $t|tfm $W/m$k.int8.tfm $t")
        done
        gguf_available || continue
        for q in f32 q8_0; do
            $TFM export "$m" --format gguf --outtype $q --out "$W/m$k.$q.gguf" >/dev/null 2>"$W/err" \
                || die "tfm export $m --format gguf --outtype $q: $(cat "$W/err")"
            for t in $threads; do
                for batch in 512 32; do cfgs+=("$k|llama.cpp $q threads $t batch $batch|llama $W/m$k.$q.gguf $t $batch"); done
            done
        done
    done
    local r i f cmd name
    for r in $(seq "$rounds"); do
        for i in $(round_order ${#cfgs[@]} "$r"); do
            IFS='|' read -r k name cmd <<<"${cfgs[$i]}"
            f="$W/times/$i"
            set -- $cmd
            case $1 in
                tfm) $TFM generate "$2" --prompt "$prompt" --tokens "$tokens" --temperature 0 --threads "$3" 2>&1 >/dev/null \
                        | sed -n 's/^generated [0-9]* tokens in [0-9.]* s (\([0-9.]*\) tok\/s.*/\1/p' >>"$f";;
                llama) (cd "$E" && node llama_gen.mjs "$2" --prompt "$prompt" --tokens "$tokens" --threads "$3" --batch "$4") 2>&1 \
                        >/dev/null | sed -n 's/^llama.cpp: [0-9]* tokens in [0-9.]* s (\([0-9.]*\) tok\/s.*/\1/p' >>"$f";;
            esac
        done
    done
    echo "generation: $tokens tokens after \"$prompt\", greedy, tokens/s (median of $rounds rounds, min-max)"
    for i in "${!cfgs[@]}"; do
        IFS='|' read -r k name cmd <<<"${cfgs[$i]}"
        printf '  %-28s %-36s %8.1f %16s\n' "$(basename "${gpts[$k]}")" "$name" "$(median "$W/times/$i")" \
            "$(sort -g "$W/times/$i" | awk 'NR == 1 { lo = $1 } { hi = $1 } END { printf "%.1f-%.1f", lo, hi }')"
    done
    # int8 over fp32 within one process (bench/gen_pair.c: warm, alternating rounds): the VM's speed drifts between
    # the processes above faster than their rounds can pair them
    local pair=$here/build/bench/gen_pair
    if [ ! -x "$pair" ]; then echo "int8 over fp32 in one process: SKIPPED (make bench-bin builds build/bench/gen_pair)"; return; fi
    for k in "${!gpts[@]}"; do
        for t in $threads; do
            echo "# $(basename "${gpts[$k]}"), int8 (A) over fp32 (B), $t thread(s):"
            "$pair" "$W/m$k.int8.tfm" "${gpts[$k]}" --tokens "$tokens" --prompt "$prompt" --threads "$t" \
                --rounds $((rounds * 5)) | grep -v '^#'
        done
    done
}

[ -n "$mt" ] && mt_compare
[ ${#gpts[@]} -gt 0 ] || [ $gpt2 = 1 ] && gpt_compare
echo "# work files: $work"
