/* Sampling the next token from logits: temperature, top-k, then a draw from the softmax. */
#include "tfm/decode.h"
#include <math.h>

int tfm_sample_logits(const float *logits, int V, float temperature, int top_k, tfm_rng *r, float *p) {
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
