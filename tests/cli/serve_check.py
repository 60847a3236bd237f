"""The HTTP checks of tests/cli/serve.sh against a running `tfm serve` (loopback): prints PASS/FAIL lines.

    serve_check.py PHASE PORT DIR [PID]
PHASE main: translations equal `tfm translate` (single, batch, form, n-best), completions equal `tfm generate`
(greedy; streamed == non-streamed), 32 concurrent clients, bad requests, a slow client, a client that leaves
mid-stream. key: --api-key. sigterm: SIGTERM (to PID) with requests in flight. DIR holds what serve.sh made:
src.txt (sources), cli.txt (tfm translate), nbest.txt (tfm translate --n-best 3), gen.txt (tfm generate, greedy),
sample.txt (sampled). Standard library only."""
import http.client
import json
import os
import re
import signal
import socket
import sys
import threading
import time
import urllib.parse

PHASE, PORT, DIR = sys.argv[1], int(sys.argv[2]), sys.argv[3]
PID = int(sys.argv[4]) if len(sys.argv) > 4 else 0
failures = 0


def check(name, ok, why=""):
    global failures
    if ok:
        print("PASS serve: " + name, flush=True)
    else:
        failures += 1
        print("FAIL serve: %s: %s" % (name, str(why)[:600]), flush=True)


def request(method, path, body=None, headers=None, timeout=60):
    """(status, headers dict, body bytes)"""
    c = http.client.HTTPConnection("127.0.0.1", PORT, timeout=timeout)
    h = {"Content-Type": "application/json"} if isinstance(body, (dict, list)) else {}
    h.update(headers or {})
    data = json.dumps(body).encode() if isinstance(body, (dict, list)) else body
    c.request(method, path, body=data, headers=h)
    r = c.getresponse()
    out = (r.status, dict((k.lower(), v) for k, v in r.getheaders()), r.read())
    c.close()
    return out


def post(path, body, headers=None):
    status, _, data = request("POST", path, body, headers)
    try:
        return status, json.loads(data)
    except ValueError:
        return status, data


def lines(name):
    with open(os.path.join(DIR, name), encoding="utf-8") as f:
        return f.read().split("\n")[:-1]


def metric(name):
    """The value of a metric line 'name value' (name may carry labels), or None."""
    _, _, text = request("GET", "/metrics")
    for line in text.decode().split("\n"):
        if line.startswith(name + " "):
            return float(line.split()[-1])
    return None


def sse_events(data):
    """The events of a server-sent event stream: (list of decoded JSON events, saw [DONE])."""
    events, done = [], False
    for ev in data.split("\n\n"):
        if not ev.startswith("data: "):
            continue
        if ev[6:] == "[DONE]":
            done = True
        else:
            events.append(json.loads(ev[6:]))
    return events, done


def stream(body, headers=None):
    """The events of a streamed completion: (status, list of decoded JSON events, saw [DONE])."""
    c = http.client.HTTPConnection("127.0.0.1", PORT, timeout=60)
    c.request("POST", "/v1/completions", body=json.dumps(dict(body, stream=True)),
              headers=dict({"Content-Type": "application/json"}, **(headers or {})))
    r = c.getresponse()
    data = r.read().decode()
    c.close()
    return (r.status,) + sse_events(data)


def held_post(path, body):
    """A POST sent but for the last byte of its body: the server has the request (it is in flight) and waits.
    Returns finish(), which sends that byte and returns (status, body text)."""
    data = json.dumps(body).encode()
    c = http.client.HTTPConnection("127.0.0.1", PORT, timeout=60)
    c.putrequest("POST", path)
    c.putheader("Content-Type", "application/json")
    c.putheader("Content-Length", str(len(data)))
    c.endheaders()
    c.send(data[:-1])

    def finish():
        c.send(data[-1:])
        r = c.getresponse()
        out = (r.status, r.read().decode())
        c.close()
        return out
    return finish


SRC, CLI = lines("src.txt"), lines("cli.txt")
PROMPT, GEN_TOKENS = "ROMEO:", 40


def gen_text(name):
    """tfm generate's output without the prompt and the final newline."""
    with open(os.path.join(DIR, name), encoding="utf-8") as f:
        t = f.read()
    return t[len(PROMPT):-1]


def completion_ok(body, want):
    status, j = post("/v1/completions", body)
    return status == 200 and j["choices"][0]["text"] == want, (status, j)


# ---------------------------------------------------------------- main
def translations():
    got = []
    for s in SRC:
        status, j = post("/translate", {"q": s, "source": "en", "target": "fr"})
        got.append(j.get("translatedText") if status == 200 else "HTTP %d %s" % (status, j))
    bad = [(s, g, w) for s, g, w in zip(SRC, got, CLI) if g != w]
    check("/translate, one sentence a request == tfm translate, byte for byte (%d sentences)" % len(SRC), not bad,
          bad[:2])
    check("the test sentences have different translations", len(set(CLI)) > len(CLI) // 2, CLI[:4])
    status, j = post("/translate", {"q": SRC, "source": "en", "target": "fr"})
    check("/translate, q an array (a batch) == tfm translate", status == 200 and j["translatedText"] == CLI,
          (status, str(j)[:300]))
    form = urllib.parse.urlencode([("q", SRC[0]), ("source", "en"), ("target", "fr")]).encode()
    status, j = post("/translate", form, {"Content-Type": "application/x-www-form-urlencoded"})
    check("/translate, a form (LibreTranslate's) == tfm translate", status == 200 and j["translatedText"] == CLI[0],
          (status, j))
    status, j = post("/translate", {"q": SRC[0] + "\n" + SRC[1], "source": "en", "target": "fr"})
    check("/translate, two lines in one item: translated line by line",
          status == 200 and j["translatedText"] == CLI[0] + "\n" + CLI[1], (status, j))
    nbest = {}
    for line in lines("nbest.txt"):
        i, hyp, _ = line.split(" ||| ")
        nbest.setdefault(int(i), []).append(hyp)
    status, j = post("/translate", {"q": SRC[:4], "source": "en", "target": "fr", "alternatives": 2})
    want = [nbest[i][1:] for i in range(4)]
    check("/translate alternatives=2 == hypotheses 2 and 3 of tfm translate --n-best 3",
          status == 200 and j["alternatives"] == want and j["translatedText"] == [nbest[i][0] for i in range(4)],
          (status, j, want))
    status, j = post("/translate", {"q": SRC[0], "source": "auto", "target": "fr"})
    check("/translate source=auto with one model into the target", status == 200 and j["translatedText"] == CLI[0]
          and j["detectedLanguage"]["language"] == "en", (status, j))
    status, _, body = request("GET", "/languages")
    check("/languages lists the loaded pair", status == 200 and json.loads(body) == [
        {"code": "en", "name": "English", "targets": ["fr"]}, {"code": "fr", "name": "French", "targets": []}], body)
    status, j = post("/attention", {"q": SRC[2], "source": "en", "target": "fr"})
    rows = j.get("attention", []) if status == 200 else []
    shape = status == 200 and len(rows) == len(j["target_tokens"]) and all(len(r) == len(j["source_tokens"]) for r in rows)
    check("/attention: the translation, a row per target token, a column per source token, rows sum to 1",
          shape and rows and j["translatedText"] == CLI[2] and all(abs(sum(r) - 1) < 2e-3 for r in rows)
          and j["source_tokens"][-1] == "<eos>", (status, str(j)[:300]))


def completions():
    greedy = gen_text("gen.txt")
    ok, why = completion_ok({"prompt": PROMPT, "max_tokens": GEN_TOKENS, "temperature": 0}, greedy)
    check("/v1/completions temperature 0 == tfm generate --temperature 0 (without the prompt)", ok, why)
    status, j = post("/v1/completions", {"prompt": PROMPT, "max_tokens": GEN_TOKENS, "temperature": 0, "model": "lm"})
    check("/v1/completions: OpenAI's shape (finish_reason length, usage)", status == 200 and j["object"] == "text_completion"
          and j["model"] == "lm" and j["choices"][0]["finish_reason"] == "length" and j["usage"] == {
              "prompt_tokens": len(PROMPT), "completion_tokens": GEN_TOKENS, "total_tokens": len(PROMPT) + GEN_TOKENS},
          (status, j))
    sample = {"prompt": PROMPT, "max_tokens": GEN_TOKENS, "temperature": 0.8, "top_k": 5, "seed": 7}
    ok, why = completion_ok(sample, gen_text("sample.txt"))
    check("/v1/completions temperature 0.8 top_k 5 seed 7 == tfm generate with the same flags", ok, why)
    for body in ({"prompt": PROMPT, "max_tokens": GEN_TOKENS, "temperature": 0}, sample):
        status, events, done = stream(body)
        text = "".join(e["choices"][0]["text"] for e in events)
        _, j = post("/v1/completions", body)
        last = events[-1] if events else {}
        check("streamed == not streamed (%s), ends with finish_reason, usage and [DONE]" % (
            "greedy" if body["temperature"] == 0 else "sampled"),
              status == 200 and done and len(events) >= 2 and text == j["choices"][0]["text"]
              and last["choices"][0]["finish_reason"] == "length" and last["usage"]["completion_tokens"] == GEN_TOKENS
              and all(e["choices"][0]["finish_reason"] is None for e in events[:-1]), (status, len(events), text))
    stop = greedy[5:7]
    status, j = post("/v1/completions", {"prompt": PROMPT, "max_tokens": GEN_TOKENS, "temperature": 0, "stop": [stop]})
    check("stop string: the text is cut before it, finish_reason stop", status == 200
          and j["choices"][0]["text"] == greedy[:greedy.index(stop)] and j["choices"][0]["finish_reason"] == "stop",
          (status, j, stop))
    status, _, body = request("GET", "/v1/models")
    check("/v1/models lists the language model", status == 200 and [m["id"] for m in json.loads(body)["data"]] == ["lm"],
          body)


def concurrent_clients():
    """32 clients at once, each 3 requests (translations of different sentences, and completions)."""
    greedy, results = gen_text("gen.txt"), [None] * 32

    def client(k):
        try:
            for r in range(3):
                i = (k * 3 + r) % len(SRC)
                if (k + r) % 4 == 3:
                    status, j = post("/v1/completions", {"prompt": PROMPT, "max_tokens": GEN_TOKENS, "temperature": 0})
                    if status != 200 or j["choices"][0]["text"] != greedy:
                        results[k] = "client %d completion: %s %s" % (k, status, j)
                        return
                else:
                    status, j = post("/translate", {"q": SRC[i], "source": "en", "target": "fr"})
                    if status != 200 or j["translatedText"] != CLI[i]:
                        results[k] = "client %d sentence %d: %s %s" % (k, i, status, j)
                        return
            results[k] = "ok"
        except Exception as e:  # noqa: BLE001 (reported as the failure)
            results[k] = "client %d: %r" % (k, e)

    threads = [threading.Thread(target=client, args=(k,)) for k in range(32)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    bad = [r for r in results if r != "ok"]
    check("32 concurrent clients x 3 requests: every answer correct", not bad, bad[:3])
    _, _, m = request("GET", "/metrics")
    batched = re.findall(r'tfm_translate_batch_lines_bucket\{le="(\d+)"\} (\d+)', m.decode())
    print("# translation calls by lines (cumulative le): " + " ".join("%s:%s" % b for b in batched))


def bad_requests():
    """Each bad request: its status, a JSON error naming the problem; the server stays healthy."""
    big = {"q": "x" * 70000, "source": "en", "target": "fr"}
    cases = [
        ("invalid JSON", "/translate", b'{"q": "go .", "source": ', 400, "invalid JSON"),
        ("missing q", "/translate", {"source": "en", "target": "fr"}, 400, "missing q"),
        ("q a number", "/translate", {"q": 3, "source": "en", "target": "fr"}, 400, "q must be a string or an array"),
        ("q an array holding a number", "/translate", {"q": ["go .", 4], "source": "en", "target": "fr"}, 400,
         "q\\[1\\] must be a string"),
        ("missing source", "/translate", {"q": "go ."}, 400, "missing source"),
        ("unknown language", "/translate", {"q": "go .", "source": "xx", "target": "fr"}, 400, "'xx' is not supported"),
        ("unknown pair", "/translate", {"q": "go .", "source": "en", "target": "de"}, 400, "en -> de is not supported"),
        ("body over --max-body", "/translate", big, 413, "--max-body"),
        ("too many q items", "/translate", {"q": ["go ."] * 41, "source": "en", "target": "fr"}, 400, "--max-items"),
        ("an item over --max-chars", "/translate", {"q": "go " * 400, "source": "en", "target": "fr"}, 400, "--max-chars"),
        ("alternatives over the beam", "/translate", {"q": "go .", "source": "en", "target": "fr", "alternatives": 3},
         400, "beam"),
        ("invalid UTF-8", "/translate", b'{"q": "go \xff", "source": "en", "target": "fr"}', 400, "UTF-8"),
        ("format html", "/translate", {"q": "go .", "source": "en", "target": "fr", "format": "html"}, 400, "html"),
        ("/attention with two lines", "/attention", {"q": "go .\nhi .", "source": "en", "target": "fr"}, 400, "one line"),
        ("max_tokens over --max-tokens", "/v1/completions", {"prompt": "A", "max_tokens": 10 ** 6}, 400, "--max-tokens"),
        ("missing prompt", "/v1/completions", {"max_tokens": 5}, 400, "missing prompt"),
        ("a prompt character outside the vocabulary", "/v1/completions", {"prompt": "\u4e2d"}, 400, "vocabulary"),
        ("unknown model", "/v1/completions", {"prompt": "A", "model": "nope"}, 404, "does not exist"),
        ("temperature a string", "/v1/completions", {"prompt": "A", "temperature": "hot"}, 400, "temperature"),
        ("n = 2", "/v1/completions", {"prompt": "A", "n": 2}, 400, "n must be 1"),
    ]
    for name, path, body, want, pattern in cases:
        headers = {"Content-Type": "application/json"} if isinstance(body, bytes) else None
        status, j = post(path, body, headers)
        msg = j.get("error") if isinstance(j, dict) else None
        if isinstance(msg, dict):
            msg = msg.get("message")
        check("bad request: %s -> %d, JSON error naming it" % (name, want),
              status == want and isinstance(msg, str) and re.search(pattern, msg) and "\n" not in msg, (status, j))
    status, j = post("/translate", b"q=go", {"Content-Type": "text/plain"})
    check("bad request: a text/plain body -> 415", status == 415 and "Content-Type" in j["error"], (status, j))
    # a chunked body (no Content-Length) over the limit: read, dropped, 413
    c = http.client.HTTPConnection("127.0.0.1", PORT, timeout=30)
    c.request("POST", "/translate", body=iter([b'{"q": "' + b"x" * 40000, b"y" * 40000 + b'"}']),
              headers={"Content-Type": "application/json", "Transfer-Encoding": "chunked"}, encode_chunked=True)
    r = c.getresponse()
    check("bad request: a chunked body over --max-body -> 413", r.status == 413 and b"--max-body" in r.read(), r.status)
    c.close()
    status, _, body = request("GET", "/nope")
    check("unknown path -> 404", status == 404 and b"not found" in body, (status, body))
    status, h, body = request("GET", "/translate")
    check("GET /translate -> 405 with Allow: POST", status == 405 and h.get("allow") == "POST", (status, h))
    status, _, body = request("GET", "/health")
    ok, why = completion_ok({"prompt": PROMPT, "max_tokens": GEN_TOKENS, "temperature": 0}, gen_text("gen.txt"))
    check("after the bad requests: /health ok and requests answered", status == 200 and body == b'{"status":"ok"}' and ok,
          (status, body, why))
    check("/metrics counts requests by endpoint and status",
          (metric('tfm_http_requests_total{endpoint="/translate",status="400"}') or 0) >= 10
          and (metric('tfm_http_requests_total{endpoint="/translate",status="413"}') or 0) >= 2
          and (metric('tfm_http_requests_total{endpoint="/translate",status="200"}') or 0) >= 20, "missing counts")


def slow_client():
    """A client sending a byte every 0.3 s is cut after --request-timeout (2 s); others are answered meanwhile."""
    s = socket.create_connection(("127.0.0.1", PORT))
    msg = b"POST /translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 40\r\n\r\n"
    cut_before = metric("tfm_http_connections_cut_total") or 0
    t0, sent, closed, others = time.time(), 0, False, None
    while time.time() - t0 < 15 and not closed:
        try:
            s.send(msg[sent % len(msg):sent % len(msg) + 1])
            sent += 1
        except OSError:
            closed = True
            break
        if others is None and sent == 3:   # another client while the slow one is connected
            status, j = post("/translate", {"q": SRC[0], "source": "en", "target": "fr"})
            others = status == 200 and j["translatedText"] == CLI[0]
        s.settimeout(0.3)
        try:
            if s.recv(100) == b"":
                closed = True
        except socket.timeout:
            pass
        except OSError:
            closed = True
    s.close()
    check("slow client (a byte every 0.3 s): connection closed after --request-timeout 2 s",
          closed and 1.5 < time.time() - t0 < 12, "closed %s after %.1f s, %d bytes" % (closed, time.time() - t0, sent))
    check("slow client: another client answered meanwhile", others is True, others)
    check("slow client: counted in /metrics (tfm_http_connections_cut_total)",
          (metric("tfm_http_connections_cut_total") or 0) == cut_before + 1, metric("tfm_http_connections_cut_total"))


def disconnect_mid_stream():
    """A streaming client that goes away frees its slot: tfm_generate_slots_busy back to 0, a job cancelled."""
    cancelled = metric("tfm_jobs_cancelled_total") or 0
    s = socket.create_connection(("127.0.0.1", PORT))
    body = json.dumps({"prompt": PROMPT, "max_tokens": 100000, "stream": True}).encode()
    s.send(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
           % (len(body), body))
    s.settimeout(30)
    got = b""
    while b"data: " not in got:
        got += s.recv(4096)
    busy = metric("tfm_generate_slots_busy")
    s.close()
    t0 = time.time()
    while time.time() - t0 < 20 and metric("tfm_generate_slots_busy") != 0:
        time.sleep(0.1)
    check("a client that disconnects mid-stream frees its slot (/metrics tfm_generate_slots_busy 1 -> 0)",
          busy == 1 and metric("tfm_generate_slots_busy") == 0, "busy %s then %s" % (busy, metric("tfm_generate_slots_busy")))
    check("... and its job is cancelled (tfm_jobs_cancelled_total + 1)",
          metric("tfm_jobs_cancelled_total") == cancelled + 1, metric("tfm_jobs_cancelled_total"))
    # the same without streaming: the handler waiting on the job notices the closed socket
    s = socket.create_connection(("127.0.0.1", PORT))
    body = json.dumps({"prompt": PROMPT, "max_tokens": 100000}).encode()
    s.send(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
           % (len(body), body))
    t0 = time.time()
    while time.time() - t0 < 20 and metric("tfm_generate_slots_busy") != 1:
        time.sleep(0.02)
    busy = metric("tfm_generate_slots_busy")
    s.close()
    t0 = time.time()
    while time.time() - t0 < 20 and metric("tfm_generate_slots_busy") != 0:
        time.sleep(0.1)
    check("a client that leaves while its (non-streamed) completion runs: cancelled, slot freed",
          busy == 1 and metric("tfm_generate_slots_busy") == 0 and metric("tfm_jobs_cancelled_total") == cancelled + 2,
          "busy %s then %s, cancelled %s" % (busy, metric("tfm_generate_slots_busy"), metric("tfm_jobs_cancelled_total")))


# ---------------------------------------------------------------- key, sigterm
def api_key():
    key = {"Authorization": "Bearer sekrit"}
    body = {"q": SRC[0], "source": "en", "target": "fr"}
    s1, j1 = post("/translate", body)
    s2, j2 = post("/translate", body, {"Authorization": "Bearer wrong"})
    s3, j3 = post("/v1/completions", {"prompt": PROMPT, "max_tokens": 3})
    check("--api-key: no key or a wrong key -> 401 with a JSON error", s1 == 401 and s2 == 401 and s3 == 401
          and j1["error"] == "Invalid API key" and j3["error"]["code"] == "invalid_api_key", (s1, j1, s2, s3, j3))
    s4, j4 = post("/translate", body, key)
    s5, j5 = post("/translate", dict(body, api_key="sekrit"))
    check("--api-key: the bearer key, or LibreTranslate's api_key field, is let in",
          s4 == 200 and j4["translatedText"] == CLI[0] and s5 == 200, (s4, j4, s5))
    status, _, _ = request("GET", "/health")
    check("--api-key: /health stays open", status == 200, status)


def sigterm():
    """Requests in flight when SIGTERM comes are all answered in full; then the server exits (serve.sh checks 0).
    In flight by construction, not by timing (a tiny model's work takes milliseconds, less than a poll): two streams
    of 300 tokens and two batches of 16 x 12 lines are sent but for the last byte of their bodies; SIGTERM comes
    once the metrics count them (the server's own count may still include the GET /metrics that saw them); the
    bodies are completed 0.5 s after the server has said so in DIR/drain.err (serve.sh's log), so all their work
    runs while the server drains."""
    greedy_long = {"prompt": PROMPT, "max_tokens": 300, "temperature": 0, "stream": True}
    held = {"stream%d" % k: held_post("/v1/completions", greedy_long) for k in range(2)}
    held.update({"translate%d" % k: held_post("/translate", {"q": SRC * 16, "source": "en", "target": "fr"})
                 for k in range(2)})
    t0 = time.time()
    while time.time() - t0 < 30 and (metric("tfm_http_requests_in_flight") or 0) < 5:   # ours + this GET
        time.sleep(0.02)
    os.kill(PID, signal.SIGTERM)
    said, log = "", os.path.join(DIR, "drain.err")
    t0 = time.time()
    while time.time() - t0 < 30 and "stopping: answering" not in said:
        time.sleep(0.02)
        with open(log, encoding="utf-8", errors="replace") as f:
            said = f.read()
    m = re.search(r"stopping: answering (\d+) request\(s\) in flight", said)
    in_flight = int(m.group(1)) if m else 0
    time.sleep(0.5)   # the drain must wait for them, not only give them a moment (it looks twice, 0.1 s apart)
    results, threads = {}, []

    def complete(name, finish):
        try:
            results[name] = finish()
        except (OSError, http.client.HTTPException) as e:   # the connection closed under it
            results[name] = (0, repr(e))
    for name, finish in held.items():
        threads.append(threading.Thread(target=complete, args=(name, finish)))
        threads[-1].start()
    for t in threads:
        t.join(120)
    want_stream = (200, True, 300, {"prompt_tokens": len(PROMPT), "completion_tokens": 300,
                                    "total_tokens": len(PROMPT) + 300})
    got = {}
    for name, (status, text) in results.items():
        if name.startswith("stream"):
            events, done = sse_events(text)
            got[name] = (status, done, sum(len(e["choices"][0]["text"]) for e in events),
                         events[-1].get("usage") if events else None)
        else:
            try:
                got[name] = (status, json.loads(text).get("translatedText") == CLI * 16)
            except ValueError:
                got[name] = (status, text[:200])
    ok = all(got.get("stream%d" % k) == want_stream for k in range(2)) and \
        all(got.get("translate%d" % k) == (200, True) for k in range(2))
    check("SIGTERM with 4 requests in flight (2 streams of 300 tokens, 2 batches of %d lines): all answered in full"
          % (16 * len(SRC)), ok and in_flight >= 4, ("the server counted %d" % in_flight, got))
    try:
        request("GET", "/health", timeout=5)
        refused = False
    except OSError:
        refused = True
    t0 = time.time()
    while not refused and time.time() - t0 < 20:   # it may still be closing the last connections
        try:
            request("GET", "/health", timeout=5)
        except OSError:
            refused = True
        time.sleep(0.1)
    check("after SIGTERM no new connection is accepted", refused, "still answering")


{"main": lambda: [translations(), completions(), concurrent_clients(), bad_requests(), slow_client(),
                  disconnect_mid_stream()],
 "key": api_key, "sigterm": sigterm}[PHASE]()
sys.exit(1 if failures else 0)
