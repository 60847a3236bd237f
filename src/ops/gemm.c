/* tfm_gemm: the single matrix-multiply entry point (see include/tfm/kernels.h).
 * Reference implementation: correct for every transpose case, threaded over rows of C.
 * (The fast packed AVX2 path replaces the inner loops; the contract stays the same.) */
#include "tfm/kernels.h"
#include <omp.h>
#include <string.h>

static inline float at(const float *X, int ld, int trans, int r, int c) {
    return trans ? X[(size_t)c * ld + r] : X[(size_t)r * ld + c];
}

void tfm_gemm(int trans_a, int trans_b, int M, int N, int K, float alpha,
              const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc) {
#pragma omp parallel for schedule(static)
    for (int i = 0; i < M; i++) {
        float *c = C + (size_t)i * ldc;
        if (beta == 0.0f) memset(c, 0, sizeof(float) * N);
        else if (beta != 1.0f) for (int j = 0; j < N; j++) c[j] *= beta;
        if (!trans_b) {
            for (int k = 0; k < K; k++) {
                float a = alpha * at(A, lda, trans_a, i, k);
                const float *b = B + (size_t)k * ldb;
                for (int j = 0; j < N; j++) c[j] += a * b[j];
            }
        } else {
            for (int j = 0; j < N; j++) {
                const float *b = B + (size_t)j * ldb;
                float s = 0;
                for (int k = 0; k < K; k++) s += at(A, lda, trans_a, i, k) * b[k];
                c[j] += alpha * s;
            }
        }
    }
}

void tfm_gemm_batched(int batch, int trans_a, int trans_b, int M, int N, int K, float alpha,
                      const float *A, int lda, size_t stride_a, const float *B, int ldb, size_t stride_b,
                      float beta, float *C, int ldc, size_t stride_c) {
    for (int i = 0; i < batch; i++)
        tfm_gemm(trans_a, trans_b, M, N, K, alpha, A + i * stride_a, lda, B + i * stride_b, ldb, beta,
                 C + i * stride_c, ldc);
}

const char *tfm_gemm_backend(void) { return "reference"; }
