/* tfm serve MODEL.tfm[:SPEC] ...: translators and language models over HTTP. Flags -> the engine
 * (include/tfm/serve.h: batching, queue, slots) and the HTTP server (src/http/http.h: limits, timeouts, key).
 * The server listens first (/health says 503 while the models load); SIGINT/SIGTERM stop it cleanly: no
 * new connections, the requests in flight answered, exit 0. Built without libmicrohttpd/cJSON it says how
 * to get them. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"

#ifndef TFM_HAVE_HTTP
int cmd_serve(int argc, char **argv) {
    (void)argc, (void)argv;
    fprintf(stderr, "tfm serve: this tfm was built without libmicrohttpd and cJSON; install them (Debian/Ubuntu: "
                    "apt-get install libmicrohttpd-dev libcjson-dev pkg-config) and rebuild with make\n");
    return CLI_EXIT_ERROR;
}
#else
#include "http/http.h"

/* Every model file readable (PATH, or PATH of PATH:SPEC)? 0, or an exit status (the error printed). */
static int check_files(const char *const *pos, int n) {
    for (int i = 0; i < n; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s", pos[i]);
        char *colon = strrchr(path, ':');
        if (access(path, R_OK) != 0 && colon) *colon = 0;
        if (access(path, R_OK) != 0) return cli_error("serve", "%s: cannot open: %s", path, strerror(errno)), CLI_EXIT_IO;
    }
    return 0;
}

/* Load every model into the engine and start it: 0, or an exit status (the error printed). */
static int load_models(tfm_serve *s, const char *const *pos, int n, const tfm_translate_options *o) {
    for (int i = 0; i < n; i++) {
        int m = tfm_serve_load_spec(s, pos[i]);
        if (m < 0 || (tfm_serve_translator(s, m) && tfm_serve_set_translate_options(s, m, o)))
            return cli_fail("serve", "%s", tfm_last_error());
        const tfm_serve_model *info = tfm_serve_model_info(s, m);
        if (info->kind == TFM_SERVE_GENERATOR)
            fprintf(stderr, "tfm serve: %s: language model '%s' (POST /v1/completions)\n", pos[i], info->name);
        else
            fprintf(stderr, "tfm serve: %s: translator %s -> %s, beam %d (POST /translate)%s\n", pos[i], info->src_lang,
                    info->tgt_lang, info->beam, !strcmp(info->src_lang, TFM_SERVE_DEFAULT_SRC)
                    ? "; the checkpoint has no language pair: name one with MODEL.tfm:SRC-TGT" : "");
    }
    return tfm_serve_start(s) ? cli_fail("serve", "%s", tfm_last_error()) : 0;
}

int cmd_serve(int argc, char **argv) {
    http_config hc;
    http_config_default(&hc);
    tfm_serve_params sp;
    tfm_serve_params_default(&sp);
    tfm_translate_options o;
    tfm_translate_options_default(&o);
    int wait_ms = 2, quiet = 0, max_body = (int)hc.lim.max_body;
    cli_flag flags[] = {
        {"host", FLAG_STR, &hc.host, "address to listen on (0.0.0.0 or :: for every interface)", 0},
        {"port", FLAG_INT, &hc.port, "port (0: any free port, printed)", 0},
        {"threads", FLAG_INT, &sp.threads, CLI_THREADS_HELP, 0},
        {"api-key", FLAG_STR, &hc.api_key, "require 'Authorization: Bearer KEY' (or LibreTranslate's api_key field)", 0},
        {"beam", FLAG_INT, &o.beam_size, "beam size of every translation (0 = the model's decode.beam, greedy if none)", 0},
        {"alpha", FLAG_FLOAT, &o.length_penalty, "GNMT length penalty (-1 = the model's decode.alpha, 0 if none)", 0},
        {"max-queue", FLAG_INT, &sp.max_queue, "requests waiting at most; more get 503 (busy)", 0},
        {"batch-size", FLAG_INT, &sp.max_batch, "most sentences decoded in one translation call", 0},
        {"batch-wait-ms", FLAG_INT, &wait_ms, "how long a batch waits for more requests after the first", 0},
        {"workers", FLAG_INT, &sp.translate_workers, "translation calls at once (each uses --threads)", 0},
        {"slots", FLAG_INT, &sp.gen_slots, "generation streams stepped together per language model", 0},
        {"max-body", FLAG_INT, &max_body, "bytes of a request body (413 beyond)", 0},
        {"max-items", FLAG_INT, &hc.lim.max_items, "q items of one /translate request", 0},
        {"max-chars", FLAG_INT, &hc.lim.max_chars, "characters of one q item or prompt", 0},
        {"max-tokens", FLAG_INT, &hc.lim.max_tokens, "the most max_tokens a completion may ask for", 0},
        {"timeout", FLAG_INT, &hc.timeout, "seconds a connection may stay idle", 0},
        {"request-timeout", FLAG_INT, &hc.request_timeout, "seconds to receive a whole request (slow clients)", 0},
        {"max-connections", FLAG_INT, &hc.max_connections, "connections at once", 0},
        {"quiet", FLAG_BOOL, &quiet, "no access log (one line per request on stderr)", 0},
    };
    cli_spec spec = {"serve", "MODEL.tfm[:SPEC] ... [--host 127.0.0.1] [--port 8080] [--threads N] [--api-key KEY]",
                     "Serve translators and language models over HTTP (docs/SERVING.md): LibreTranslate's\n"
                     "POST /translate and GET /languages, OpenAI's POST /v1/completions and GET /v1/models,\n"
                     "POST /attention, GET /health, GET /metrics (Prometheus) and a web page at /.\n"
                     "SPEC: a translator's language pair (de-en; default: the checkpoint's, src-tgt if none),\n"
                     "a language model's name (default: the file name). Translations equal tfm translate's.",
                     flags, (int)(sizeof flags / sizeof *flags), 1, 64};
    const char *pos[64];
    int n_pos, rc = cli_parse(&spec, argc, argv, pos, &n_pos);
    if (rc) return rc == 1 ? 0 : rc;
    if (hc.port < 0 || hc.port > 65535) return cli_error("serve", "--port must be in 0..65535, got %d", hc.port);
    if (cli_check_threads("serve", sp.threads)) return CLI_EXIT_USAGE;
    if (wait_ms < 0 || wait_ms > 10000) return cli_error("serve", "--batch-wait-ms must be in 0..10000, got %d", wait_ms);
    if (max_body < 1024 || hc.lim.max_items < 1 || hc.lim.max_chars < 1 || hc.lim.max_tokens < 1)
        return cli_error("serve", "--max-body must be >= 1024 and --max-items, --max-chars, --max-tokens >= 1");
    if (hc.timeout < 1 || hc.request_timeout < 1 || hc.max_connections < 1)
        return cli_error("serve", "--timeout, --request-timeout and --max-connections must be >= 1");
    if (hc.api_key && !hc.api_key[0]) return cli_error("serve", "--api-key must not be empty");
    sp.batch_wait_us = wait_ms * 1000;
    hc.lim.max_body = (size_t)max_body;
    hc.access_log = !quiet;
    if ((rc = check_files(pos, n_pos))) return rc;
    tfm_serve *s = tfm_serve_create(&sp);
    if (!s) return cli_error("serve", "%s", tfm_last_error());   /* a flag out of range, named */
    /* signals are taken by sigwait below: blocked before any thread starts, so every thread inherits it */
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT), sigaddset(&stop, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop, NULL);
    signal(SIGPIPE, SIG_IGN);
    http_server *h = http_start(&hc);
    if (!h) {
        tfm_serve_free(s);
        return cli_fail("serve", "%s", tfm_last_error());
    }
    int v6 = strchr(hc.host, ':') != NULL;   /* an IPv6 address goes in brackets */
    fprintf(stderr, "tfm serve: listening on http://%s%s%s:%d/ (loading %d model%s)\n", v6 ? "[" : "", hc.host,
            v6 ? "]" : "", http_port(h), n_pos, n_pos > 1 ? "s" : "");
    if (!(rc = load_models(s, pos, n_pos, &o))) {
        http_set_engine(h, s);
        fprintf(stderr, "tfm serve: ready (SIGINT or SIGTERM stops)\n");
        int sig = 0;
        sigwait(&stop, &sig);
        fprintf(stderr, "tfm serve: %s: stopping\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
    }
    http_free(h);   /* answers what is in flight first */
    tfm_serve_free(s);
    if (!rc) fprintf(stderr, "tfm serve: stopped\n");
    return rc;
}
#endif
