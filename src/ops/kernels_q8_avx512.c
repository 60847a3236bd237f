/* The AVX-512 VNNI tile of the int8 GEMM (the body is src/ops/q8_vnni_body.h). Compiled with -mavx512f
 * -mavx512bw -mavx512vnni by the Makefile on x86; src/ops/gemm_q8.c calls it only where cpuid reports
 * AVX512F, AVX512BW and AVX512_VNNI. */
#include "ops/isa.h"
#include "tfm/core.h"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VNNI__)
#include <immintrin.h>
const int tfm_q8_vnni_built_ = 1;
#define Q8V_NAME tfm_q8_tile_vnni
#define Q8V_PANEL_NAME tfm_q8_panel_tile_vnni
#define Q8V_PANEL_ROW_NAME tfm_q8_panel_row_vnni
#include "ops/q8_vnni_body.h"
#else
const int tfm_q8_vnni_built_ = 0;
void tfm_q8_tile_vnni(int mr, int nr, int kb, const int8_t *a, size_t lda, const int8_t *w, size_t ldw, int32_t *out) {
    (void)mr, (void)nr, (void)kb, (void)a, (void)lda, (void)w, (void)ldw, (void)out;
    tfm_fatal("int8 GEMM: the AVX-512 VNNI kernel was not built (compiler without -mavx512vnni)");
}
void tfm_q8_panel_tile_vnni(int groups, const int8_t *a, size_t lda, const int8_t *p, int32_t *out) {
    (void)groups, (void)a, (void)lda, (void)p, (void)out;
    tfm_fatal("int8 GEMM: the AVX-512 VNNI kernel was not built (compiler without -mavx512vnni)");
}
void tfm_q8_panel_row_vnni(int groups, int np, const int8_t *a, const int8_t *p, int32_t *out) {
    (void)groups, (void)np, (void)a, (void)p, (void)out;
    tfm_fatal("int8 GEMM: the AVX-512 VNNI kernel was not built (compiler without -mavx512vnni)");
}
#endif
