/* Sampling the next token from logits: temperature, top-k, top-p (nucleus), then a draw from the softmax. */
#include "tfm/decode.h"
#include <math.h>
#include <string.h>
#include <stdlib.h>

static int desc(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x < y) - (x > y);
}

/* Keep the most likely tokens whose mass reaches top_p * s: zero every p[v] below the smallest kept
 * probability (ties at the threshold are all kept). Returns the new sum. */
static double nucleus(float *p, int V, double s, float top_p, float *sorted) {
    memcpy(sorted, p, sizeof(float) * (size_t)V);
    qsort(sorted, (size_t)V, sizeof(float), desc);
    double acc = 0, want = (double)top_p * s;
    float thresh = sorted[0];
    for (int i = 0; i < V && sorted[i] > 0; i++) {
        acc += sorted[i];
        thresh = sorted[i];
        if (acc >= want) break;
    }
    double kept = 0;
    for (int v = 0; v < V; v++) {
        if (p[v] < thresh) p[v] = 0.0f;
        kept += p[v];
    }
    return kept;
}

int tfm_sample_logits(const float *logits, int V, float temperature, int top_k, tfm_rng *r, float *p) {
    return tfm_sample_logits_p(logits, V, temperature, top_k, 1.0f, r, p);
}

int tfm_sample_logits_p(const float *logits, int V, float temperature, int top_k, float top_p, tfm_rng *r,
                        float *p) {
    if (temperature <= 0) { /* greedy */
        int best = 0;
        for (int v = 1; v < V; v++) if (logits[v] > logits[best]) best = v;
        return best;
    }
    float cutoff = -INFINITY;
    if (top_k > 0 && top_k < V) { /* the k-th largest logit, by partial selection on a copy */
        for (int v = 0; v < V; v++) p[v] = logits[v];
        for (int i = 0; i < top_k; i++) {
            int best = i;
            for (int v = i + 1; v < V; v++) if (p[v] > p[best]) best = v;
            float t = p[i]; p[i] = p[best]; p[best] = t;
        }
        cutoff = p[top_k - 1];
    }
    float mx = -INFINITY;
    for (int v = 0; v < V; v++) if (logits[v] > mx) mx = logits[v];
    double s = 0;
    for (int v = 0; v < V; v++) {
        p[v] = logits[v] >= cutoff ? expf((logits[v] - mx) / temperature) : 0.0f;
        s += p[v];
    }
    if (top_p > 0 && top_p < 1) s = nucleus(p, V, s, top_p, p + V);
    double u = tfm_rng_uniform(r) * s, acc = 0;
    int last = 0;
    for (int v = 0; v < V; v++) {
        if (p[v] <= 0) continue;
        acc += p[v];
        last = v;
        if (u < acc) return v;
    }
    return last;
}
