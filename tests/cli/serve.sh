# tfm serve (issue 30) on loopback, a free port each time: a tiny en-fr translator (fra-eng, 300 pairs) and a
# tiny character GPT are trained here, then served. The HTTP checks are in serve_check.py (standard-library
# Python): translations == tfm translate, completions == tfm generate, streaming, 32 concurrent clients, bad
# requests, a slow client, a client leaving mid-stream, --api-key, SIGTERM with requests in flight. Here:
# 503 while loading, the access log, clean exits, and the page in headless Chromium (serve_page.js).
source "$(dirname "$0")/lib.bash"
FRA=${DATA:-../shared/data}/fra-eng/fra.txt
PY=/usr/bin/python3; [ -x "$PY" ] || PY=python3
if "$TFM" serve --help 2>&1 | grep -q "built without libmicrohttpd"; then
    skip "serve" "tfm was built without libmicrohttpd/cJSON (apt-get install libmicrohttpd-dev libcjson-dev)"; exit 0
fi
if [ ! -f "$FRA" ]; then skip "serve" "no fra-eng data in $FRA"; exit 0; fi
# libmicrohttpd (and the GnuTLS it brings) is loaded by tfm serve only (src/http/mhd.h), not at every start
if command -v ldd >/dev/null; then
    if ldd "$TFM" | grep -Eq 'libmicrohttpd|libgnutls'; then fail "serve: tfm links libmicrohttpd" "$(ldd "$TFM" | grep -E 'microhttpd|gnutls' | tr -s '\t ' ' ')"
    else pass "serve: libmicrohttpd and GnuTLS not loaded at start (tfm serve loads them)"; fi
fi

"$TFM" train-mt --tsv "$FRA" --num-examples 300 --epochs 30 --min-freq 1 --out "$TMP/mt.tfm" --log-every 0 --threads 2 \
    >/dev/null 2>"$TMP/train.err" || { fail "serve: train-mt" "$(tail -n 2 "$TMP/train.err")"; exit 0; }
head -c 20000 data/demo.txt >"$TMP/small.txt"
"$TFM" train-lm --data "$TMP/small.txt" --out "$TMP/lm.tfm" --n-layer 2 --n-head 2 --n-embd 32 --block-size 32 \
    --batch-size 8 --iters 150 --eval-every 150 --eval-iters 1 --threads 2 >/dev/null 2>"$TMP/train.err" \
    || { fail "serve: train-lm" "$(tail -n 2 "$TMP/train.err")"; exit 0; }
# what the CLI makes of the same inputs: the server must give exactly this
head -n 300 "$FRA" | cut -f1 | awk 'NR % 25 == 2' >"$TMP/src.txt"   # 12 sentences the model was trained on
"$TFM" translate "$TMP/mt.tfm" --beam 3 <"$TMP/src.txt" >"$TMP/cli.txt" 2>/dev/null
"$TFM" translate "$TMP/mt.tfm" --beam 3 --n-best 3 <"$TMP/src.txt" >"$TMP/nbest.txt" 2>/dev/null
"$TFM" generate "$TMP/lm.tfm" --prompt "ROMEO:" --tokens 40 --temperature 0 >"$TMP/gen.txt" 2>/dev/null
"$TFM" generate "$TMP/lm.tfm" --prompt "ROMEO:" --tokens 40 --temperature 0.8 --top-k 5 --seed 7 >"$TMP/sample.txt" 2>/dev/null

# the library tfm serve loads: a file that is not there, or is not libmicrohttpd, is one line (exit 1)
expect_exit "serve: TFM_MHD_LIBRARY names no file" 1 "^tfm serve: cannot load $TMP/none.so .*apt-get install libmicrohttpd" \
    env TFM_MHD_LIBRARY="$TMP/none.so" "$TFM" serve "$TMP/mt.tfm" --port 0
expect_exit "serve: TFM_MHD_LIBRARY names another library" 1 "^tfm serve: libm.so.6 has no MHD_start_daemon" \
    env TFM_MHD_LIBRARY=libm.so.6 "$TFM" serve "$TMP/mt.tfm" --port 0

PID=""
# start_server NAME ARGS...: tfm serve on a free port, stderr in $TMP/NAME.err; sets PID and PORT once it says
# "ready" (or listening, for a model that never loads: WAIT=listening)
start_server() {
    local name=$1; shift
    "$TFM" serve "$@" --port 0 --threads 2 >"$TMP/$name.out" 2>"$TMP/$name.err" &
    PID=$!
    PORT=""
    for _ in $(seq 300); do
        PORT=$(sed -n 's|^tfm serve: listening on http://[^ ]*:\([0-9]*\)/.*|\1|p' "$TMP/$name.err")
        if [ -n "$PORT" ] && grep -q "${WAIT:-ready}" "$TMP/$name.err"; then return 0; fi
        kill -0 "$PID" 2>/dev/null || break
        sleep 0.1
    done
    fail "serve: $name starts" "$(tail -n 3 "$TMP/$name.err")"
    kill "$PID" 2>/dev/null
    return 1
}
# stop_server NAME SIGNAL: the exit status after the signal (0 expected), within 60 s
stop_server() {
    kill -"$2" "$PID"
    for _ in $(seq 600); do kill -0 "$PID" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$PID" 2>/dev/null; then kill -9 "$PID"; fail "serve: $1 stops on SIG$2" "still running after 60 s"; return; fi
    wait "$PID"
    local rc=$?
    [ $rc -eq 0 ] && grep -q "^tfm serve: stopped" "$TMP/$1.err" && pass "serve: $1: SIG$2 -> clean stop, exit 0" \
        || fail "serve: $1: SIG$2 -> exit 0" "exit $rc: $(tail -n 3 "$TMP/$1.err")"
}

# ---- the main server: every endpoint, bad input, load, slow and leaving clients, the page
if start_server main "$TMP/mt.tfm:en-fr" "$TMP/lm.tfm" --beam 3 --max-items 40 --max-body 65536 --max-chars 1000 \
        --max-tokens 100000 --timeout 1 --request-timeout 2; then
    grep -q "translator en -> fr, beam 3" "$TMP/main.err" && grep -q "language model 'lm'" "$TMP/main.err" \
        && pass "serve: startup lines name each model" || fail "serve: startup lines" "$(head -n 4 "$TMP/main.err")"
    "$PY" tests/cli/serve_check.py main "$PORT" "$TMP"
    if command -v node >/dev/null && [ -x /usr/bin/chromium ]; then
        SHOT=$(dirname "$TFM")/serve-page.png
        timeout 120 node tests/cli/serve_page.js "$PORT" "$TMP" "$SHOT" || fail "serve: page test" "exit $?"
    else skip "serve: page in headless Chromium" "node or /usr/bin/chromium missing (apt-get install nodejs chromium)"; fi
    stop_server main INT
    # every request got an answer or a logged error: the access log has a line for each kind
    grep -q '"POST /translate" 200 [0-9]*B' "$TMP/main.err" && grep -q '"POST /translate" 413 ' "$TMP/main.err" \
        && grep -q '"POST /v1/completions" 200 stream' "$TMP/main.err" \
        && grep -q '"POST /v1/completions" 200 stream .*(connection closed before the end of the answer)' "$TMP/main.err" \
        && grep -q 'no complete request within 2 s (--request-timeout): connection closed' "$TMP/main.err" \
        && pass "serve: access log: a line per request; the client that left and the slow client logged" \
        || fail "serve: access log" "$(grep -c '^\[' "$TMP/main.err") lines: $(grep -v '" 200 ' "$TMP/main.err" | tail -n 5)"
fi

# ---- --api-key
if start_server key "$TMP/mt.tfm:en-fr" "$TMP/lm.tfm" --beam 3 --api-key sekrit --quiet; then
    "$PY" tests/cli/serve_check.py key "$PORT" "$TMP"
    [ "$(grep -c '^\[' "$TMP/key.err")" -eq 0 ] && pass "serve: --quiet: no access log" || fail "serve: --quiet" "$(head -n 3 "$TMP/key.err")"
    stop_server key TERM
fi

# ---- SIGTERM with requests in flight (serve_check.py sends it)
if start_server drain "$TMP/mt.tfm:en-fr" "$TMP/lm.tfm" --beam 3 --max-items 200; then
    "$PY" tests/cli/serve_check.py sigterm "$PORT" "$TMP" "$PID"
    for _ in $(seq 600); do kill -0 "$PID" 2>/dev/null || break; sleep 0.1; done
    wait "$PID"; rc=$?
    [ $rc -eq 0 ] && grep -q "stopping: answering [0-9]* request(s) in flight" "$TMP/drain.err" \
        && pass "serve: SIGTERM: the requests in flight answered, then exit 0" || fail "serve: SIGTERM exit" "exit $rc: $(tail -n 4 "$TMP/drain.err")"
fi

# ---- while the models load: /health and the API answer 503 (the model is a FIFO nobody writes yet)
mkfifo "$TMP/slow.tfm"
if WAIT=listening start_server loading "$TMP/slow.tfm"; then
    h=$(curl -s -o "$TMP/h.json" -w '%{http_code}' "http://127.0.0.1:$PORT/health")
    t=$(curl -s -o "$TMP/t.json" -w '%{http_code}' -d '{"q":"go .","source":"en","target":"fr"}' "http://127.0.0.1:$PORT/translate")
    [ "$h" = 503 ] && [ "$(cat "$TMP/h.json")" = '{"status":"loading"}' ] && [ "$t" = 503 ] && grep -q loading "$TMP/t.json" \
        && pass "serve: while loading: /health 503 {\"status\":\"loading\"}, /translate 503" \
        || fail "serve: while loading" "health $h $(cat "$TMP/h.json"), translate $t $(cat "$TMP/t.json")"
    : >"$TMP/slow.tfm"   # a writer opens and closes it: the load fails (not a regular file)
    for _ in $(seq 300); do kill -0 "$PID" 2>/dev/null || break; sleep 0.1; done
    wait "$PID"; rc=$?
    [ $rc -eq 74 ] && [ "$(grep -c 'not a regular file' "$TMP/loading.err")" -eq 1 ] \
        && pass "serve: a model that cannot be loaded: one error line, exit 74" \
        || fail "serve: load failure" "exit $rc: $(tail -n 2 "$TMP/loading.err")"
fi

# ---- command-line errors: one line naming the flag or the file (a missing file is found before listening)
expect_exit "serve: --port out of range" 2 "--port must be in 0..65535" "$TFM" serve "$TMP/mt.tfm" --port 70000
expect_exit "serve: --batch-wait-ms out of range" 2 "--batch-wait-ms must be in 0..10000" "$TFM" serve "$TMP/mt.tfm" --batch-wait-ms -1
expect_exit "serve: a missing model file" 74 "nope.tfm: cannot open" "$TFM" serve "$TMP/nope.tfm:de-en" --port 0
# errors found while loading come after the "listening" line: the last line names them, nothing stays listening
load_error() {   # NAME STATUS PATTERN ARGS...
    local name=$1 status=$2 pattern=$3; shift 3
    timeout 60 "$TFM" serve "$@" --port 0 >"$TMP/out" 2>"$TMP/err"; local rc=$?
    [ $rc -eq "$status" ] && tail -n 1 "$TMP/err" | grep -Eq -- "$pattern" && [ ! -s "$TMP/out" ] \
        && pass "$name (exit $status, the error on the last line)" || fail "$name" "exit $rc: $(cat "$TMP/err")"
}
load_error "serve: a translator's spec that is not a language pair" 1 "':french' must name a language pair" "$TMP/mt.tfm:french"
load_error "serve: two models for one pair" 1 "already translates en -> fr" "$TMP/mt.tfm:en-fr" "$TMP/mt.tfm:en-fr"
load_error "serve: a file that is not a checkpoint" 65 "small.txt" "$TMP/small.txt"
