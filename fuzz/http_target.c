/* Fuzz target "http": tfm serve's request parsing (src/http/request.c, with cJSON), the bodies of
 * POST /translate and /attention (JSON and forms) and POST /v1/completions. The first input byte picks the
 * parser and the Content-Type, the rest is the body. Contract: return normally, never crash, hang or leak;
 * a refusal is an HTTP status 400/415 with a one-line message naming the field or the limit. A separate
 * harness from fuzz/targets.c because it links cJSON (built only when the Makefile finds it). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/request.h"

static int refused_cleanly(const http_error *e) {
    if ((e->status != 400 && e->status != 415 && e->status != 500) || !e->msg[0] || strchr(e->msg, '\n')) {
        fprintf(stderr, "bad refusal: status %d, message '%s'\n", e->status, e->msg);
        abort();
    }
    return 0;
}

int tfm_fuzz_run(const char *target, const uint8_t *d, size_t n) {
    (void)target;
    if (n == 0) return 0;
    static const char *const types[] = {"application/json", "application/x-www-form-urlencoded", NULL,
                                        "multipart/form-data", "application/json; charset=utf-8"};
    int pick = d[0] % 10;
    const char *body = (const char *)d + 1;
    size_t len = n - 1;
    char *copy = malloc(len + 1);   /* the server hands over a NUL-terminated body */
    if (!copy) return 0;
    memcpy(copy, body, len);
    copy[len] = 0;
    http_limits lim = {1 << 20, 16, 200, 512};
    http_error e;
    http_body_kind kind = http_body_kind_of(types[pick % 5], copy, len);
    int ok;
    if (pick < 5) {
        http_translate_req r;
        ok = http_parse_translate(copy, len, kind, &lim, &r, &e) == 0;
        if (ok) {   /* what the handlers rely on */
            if (!r.source || !r.target || r.n_q < 0 || r.n_q > lim.max_items || r.alternatives < 0 || r.alternatives > 64) abort();
            for (int i = 0; i < r.n_q; i++)
                if (!r.q[i]) abort();
            http_translate_req_free(&r);
        }
    } else {
        http_completion_req r;
        ok = http_parse_completion(copy, len, kind, &lim, &r, &e) == 0;
        if (ok) {
            if (!r.prompt || !r.prompt[0] || r.o.max_tokens < 0 || r.o.max_tokens > lim.max_tokens) abort();
            http_completion_req_free(&r);
        }
    }
    if (!ok) refused_cleanly(&e);
    free(copy);
    return ok;
}
