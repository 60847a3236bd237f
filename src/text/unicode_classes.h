/* Unicode code point classes of the GPT-2 pre-tokenizer regex, as JavaScript's regex engine defines them
 * (tables generated from the Unicode Character Database by scripts/gen_unicode_classes.py into
 * src/text/unicode_classes.c). Internal to src/text. */
#ifndef TFM_TEXT_UNICODE_CLASSES_H
#define TFM_TEXT_UNICODE_CLASSES_H

#include <stdint.h>

/* The Unicode version of the tables ("17.0.0"). */
extern const char tfm_unicode_classes_version[];
/* 1 if cp is in \p{L} (General_Category L*: Lu Ll Lt Lm Lo). */
int tfm_uc_letter(uint32_t cp);
/* 1 if cp is in \p{N} (General_Category N*: Nd Nl No). */
int tfm_uc_number(uint32_t cp);
/* 1 if cp is in JavaScript's \s (WhiteSpace and LineTerminator: U+0009..U+000D, U+0020, U+00A0, U+FEFF,
 * U+2028, U+2029 and every Zs). Not the same set as Python's \s (no U+001C..U+001F, no U+0085). */
int tfm_uc_js_space(uint32_t cp);

#endif
