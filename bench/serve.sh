#!/usr/bin/env bash
# tfm serve under load (issue 30), on loopback, with Debian's wrk 4.1 (bench/serve_wrk.lua: every connection
# is a client sending one request after the other). Not a test: timings, for docs/BENCHMARKS.md; run it on a
# quiet machine.
#   bench/serve.sh MT.tfm [--lm LM.tfm] [--src FILE] [--pair de-en] [--beam 4] [--threads N] [--duration S]
#                  [--clients "1 8 32 128"] [--streams "1 16"] [--tokens N] [--sentences N] [--serve-flags "..."]
# MT.tfm: the translator of recipes/multi30k-de-en.sh; FILE: test_2016_flickr.de (default); --lm a language
# model for the generation part (skipped without). What it measures, in order:
#   1. offline: `tfm translate --beam B --threads N` on the sentences (the file repeated to >= --sentences
#      lines): sentences/s over the wall time, less the model's load time (tfm translate on no input);
#   2. a check: the server's translations of the file (one batched request) == tfm translate's, byte for byte;
#   3. one sentence per request at each --clients level (wrk -c C -t 1, --duration seconds after a warm-up):
#      sentences/s, its ratio to offline (the issue's target: >= 0.90 at 32 clients), p50/p99 latency,
#      non-200 answers, mean lines per decoding call (/metrics: dynamic batching at work);
#   4. single-sentence latency at 1 client, greedy (a server with --beam 1) and beam B: p50/p99;
#   5. with --lm: 1 and 16 concurrent streams (--streams) of --tokens sampled tokens: generated tokens/s;
#   6. each server's peak RSS (VmHWM).
# wrk runs on the same machine and takes CPU from the server: the load generator is part of the cost.
set -u
cd "$(dirname "$0")/.."
usage() { sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; }
TFM=${TFM:-build/tfm}
MT="" LM="" SRC=../shared/data/multi30k/test_2016_flickr.de PAIR=de-en BEAM=4 THREADS=0 DUR=20 CLIENTS="1 8 32 128"
STREAMS="1 16" TOKENS=128 MIN_SENT=3000 SERVE_FLAGS=""
while [ $# -gt 0 ]; do
    case $1 in
        --lm) LM=${2:?}; shift ;;
        --src) SRC=${2:?}; shift ;;
        --pair) PAIR=${2:?}; shift ;;
        --beam) BEAM=${2:?}; shift ;;
        --threads) THREADS=${2:?}; shift ;;
        --duration) DUR=${2:?}; shift ;;
        --clients) CLIENTS=${2:?}; shift ;;
        --streams) STREAMS=${2:?}; shift ;;
        --tokens) TOKENS=${2:?}; shift ;;
        --sentences) MIN_SENT=${2:?}; shift ;;
        --serve-flags) SERVE_FLAGS=${2:?}; shift ;;
        -h|--help) usage; exit 0 ;;
        -*) echo "bench/serve.sh: unknown option '$1' (--help)" >&2; exit 2 ;;
        *) [ -z "$MT" ] && MT=$1 || { echo "bench/serve.sh: one translator only" >&2; exit 2; } ;;
    esac
    shift
done
[ -n "$MT" ] || { usage >&2; exit 2; }
for f in "$TFM" "$MT" "$SRC" ${LM:+"$LM"}; do [ -r "$f" ] || { echo "bench/serve.sh: $f: not readable" >&2; exit 66; }; done
command -v wrk >/dev/null || { echo "bench/serve.sh: needs wrk (apt-get install wrk)" >&2; exit 69; }
for t in curl python3; do command -v $t >/dev/null || { echo "bench/serve.sh: needs $t (apt-get install $t)" >&2; exit 69; }; done
[ "$THREADS" -gt 0 ] 2>/dev/null || THREADS=$(nproc)
SRC_LANG=${PAIR%%-*} TGT_LANG=${PAIR#*-}
W=$(mktemp -d)
PID=""
trap '[ -n "$PID" ] && kill "$PID" 2>/dev/null; rm -rf "$W"' EXIT

bash bench/sysinfo.sh
echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(git log -1 --format=%h 2>/dev/null); loadavg at start $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# load generator: $(wrk --version 2>&1 | head -n 1 | awk '{ print $1, $2 }'), 1 thread, keep-alive connections = clients"
echo "# model $MT ($PAIR), beam $BEAM, --threads $THREADS, sentences from $SRC ($(wc -l <"$SRC") lines), $DUR s per level"

now() { date +%s.%N; }
# ---- 1. offline
n=0; : >"$W/src.txt"
while [ "$n" -lt "$MIN_SENT" ]; do cat "$SRC" >>"$W/src.txt"; n=$(wc -l <"$W/src.txt"); done
# the offline reference gets every core the server gets: --threads x --workers (from --serve-flags)
WORKERS=$(echo "$SERVE_FLAGS" | sed -n 's/.*--workers[ =]\([0-9]*\).*/\1/p'); OFF_THREADS=$((THREADS * ${WORKERS:-1}))
t0=$(now); "$TFM" translate "$MT" --beam "$BEAM" --threads "$OFF_THREADS" </dev/null >/dev/null 2>&1; t1=$(now)
"$TFM" translate "$MT" --beam "$BEAM" --threads "$OFF_THREADS" <"$W/src.txt" >"$W/offline.txt" 2>/dev/null || {
    echo "bench/serve.sh: tfm translate failed" >&2; exit 1; }
t2=$(now)
# (the load time is subtracted only when it is a small part: a tiny model's run can be as short as its start)
OFFLINE=$(echo "$n $t0 $t1 $t2" | awk '{ t = $4 - $3; l = $2 - $1; printf "%.2f", $1 / (l < t / 2 ? t - l : t) }')
echo "offline: tfm translate --threads $OFF_THREADS, $n sentences: $OFFLINE sentences/s (load time $(echo "$t0 $t1" | awk '{ printf "%.2f", $2 - $1 }') s subtracted)"

# start_server ARGS...: sets PID and PORT
start_server() {
    "$TFM" serve "$@" --port 0 --threads "$THREADS" --quiet --max-queue 1024 --max-items 100000 $SERVE_FLAGS \
        >/dev/null 2>"$W/server.err" &
    PID=$!
    PORT=""
    for _ in $(seq 600); do
        grep -q "ready" "$W/server.err" && PORT=$(sed -n 's|^tfm serve: listening on http://[^ ]*:\([0-9]*\)/.*|\1|p' "$W/server.err")
        [ -n "$PORT" ] && return 0
        kill -0 "$PID" 2>/dev/null || break
        sleep 0.1
    done
    echo "bench/serve.sh: tfm serve did not start: $(tail -n 2 "$W/server.err")" >&2
    exit 1
}
stop_server() {   # prints the peak RSS
    echo "peak RSS of the server: $(awk '/^VmHWM/ { printf "%.1f MiB", $2 / 1024 }' /proc/"$PID"/status)"
    kill -TERM "$PID"; wait "$PID" 2>/dev/null; PID=""
}
metric() { curl -s "http://127.0.0.1:$PORT/metrics" | awk -v m="$1" '$1 == m { print $2 }'; }
# run_wrk CLIENTS SECONDS ARGS...: one wrk run; prints "rps p50 p99 non200"
run_wrk() {
    local c=$1 d=$2; shift 2
    wrk -t 1 -c "$c" -d "${d}s" --latency --timeout 60s -s bench/serve_wrk.lua "http://127.0.0.1:$PORT" -- "$@" >"$W/wrk.txt" 2>&1
    awk '/Requests\/sec:/ { rps = $2 }
         /^ +50%/ { p50 = $2 } /^ +99%/ { p99 = $2 }
         /Non-2xx/ { bad += $NF }
         END { printf "%s %s %s %d\n", rps, p50, p99, bad }' "$W/wrk.txt"
}

# ---- 2. the check, 3. clients
start_server "$MT:$PAIR" --beam "$BEAM"
python3 -c 'import json, sys; print(json.dumps({"source": sys.argv[2], "target": sys.argv[3],
    "q": open(sys.argv[1], encoding="utf-8").read().split("\n")[:-1]}))' "$SRC" "$SRC_LANG" "$TGT_LANG" >"$W/batch.json"
curl -s -H 'Content-Type: application/json' --data-binary @"$W/batch.json" "http://127.0.0.1:$PORT/translate" >"$W/batch.out"
head -n "$(wc -l <"$SRC")" "$W/offline.txt" >"$W/want.txt"
if python3 -c 'import json, sys; a = json.load(open(sys.argv[1]))["translatedText"];
b = open(sys.argv[2], encoding="utf-8").read().split("\n")[:-1]; sys.exit(0 if a == b else 1)' "$W/batch.out" "$W/want.txt"; then
    echo "check: the server's translations of the $(wc -l <"$SRC") sentences == tfm translate's, byte for byte"
else
    echo "check FAILED: the server's translations differ from tfm translate's"
fi
run_wrk 8 3 translate "$SRC" "$SRC_LANG" "$TGT_LANG" >/dev/null   # warm-up
echo
echo "| clients | sentences/s | / offline | p50 latency | p99 latency | lines per decoding call | non-200 |"
echo "|--------:|------------:|----------:|------------:|------------:|------------------------:|--------:|"
for c in $CLIENTS; do
    s0=$(metric tfm_translate_batch_lines_sum); k0=$(metric tfm_translate_batch_lines_count)
    read -r rps p50 p99 bad < <(run_wrk "$c" "$DUR" translate "$SRC" "$SRC_LANG" "$TGT_LANG")
    s1=$(metric tfm_translate_batch_lines_sum); k1=$(metric tfm_translate_batch_lines_count)
    echo "$c $rps $OFFLINE $p50 $p99 $s0 $s1 $k0 $k1 $bad" | awk '{ printf "| %d | %.2f | %.3f | %s | %s | %.1f | %d |\n",
        $1, $2, $2 / $3, $4, $5, (($9 - $8) > 0 ? ($7 - $6) / ($9 - $8) : 0), $10 }'
done
stop_server

# ---- 4. single-sentence latency at 1 client: greedy and beam B
echo
echo "| 1 client | p50 latency | p99 latency | sentences/s |"
echo "|----------|------------:|------------:|------------:|"
for b in 1 "$BEAM"; do
    start_server "$MT:$PAIR" --beam "$b" >/dev/null
    read -r rps p50 p99 bad < <(run_wrk 1 "$DUR" translate "$SRC" "$SRC_LANG" "$TGT_LANG")
    echo "| beam $b | $p50 | $p99 | $rps |"
    stop_server >/dev/null
done

# ---- 5. generation
if [ -n "$LM" ]; then
    start_server "$LM:lm"
    run_wrk 4 3 complete "ROMEO:" "$TOKENS" >/dev/null   # warm-up
    echo
    echo "| streams | generated tokens/s | completions/s | p50 latency | p99 latency | streams per step | non-200 |"
    echo "|--------:|-------------------:|--------------:|------------:|------------:|-----------------:|--------:|"
    for c in $STREAMS; do
        s0=$(metric tfm_generate_batch_streams_sum); k0=$(metric tfm_generate_batch_streams_count)
        read -r rps p50 p99 bad < <(run_wrk "$c" "$DUR" complete "ROMEO:" "$TOKENS")
        s1=$(metric tfm_generate_batch_streams_sum); k1=$(metric tfm_generate_batch_streams_count)
        echo "$c $rps $TOKENS $p50 $p99 $s0 $s1 $k0 $k1 $bad" | awk '{ printf "| %d | %.1f | %.2f | %s | %s | %.1f | %d |\n",
            $1, $2 * $3, $2, $4, $5, (($9 - $8) > 0 ? ($7 - $6) / ($9 - $8) : 0), $10 }'
    done
    stop_server
fi
