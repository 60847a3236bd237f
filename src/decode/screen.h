/* Private to the library and its tests (the screen itself: include/tfm/decode.h, src/decode/screen.c). */
#ifndef TFM_DECODE_SCREEN_H
#define TFM_DECODE_SCREEN_H

/* The activation levels a screened step of `rows` rows quantizes to on the active int8 path: 127 (8 bits), or
 * 63 (7 bits: the panels' GEMM on AVX2 from 5 rows). The bound's activation term is amax / (2 levels). */
int tfm_logit_screen_levels_(int rows);

#endif
