/* CRC-32 of checkpoint entries (private to the library; tfm_crc32 in tfm/io.h is the public entry point). */
#ifndef TFM_CORE_CRC32_H
#define TFM_CORE_CRC32_H
#include <stddef.h>
#include <stdint.h>

/* Slicing-by-8 tables: t[0] is the byte-at-a-time table, t[k][i] the CRC of byte i followed by k zero bytes. */
typedef struct {
    uint32_t t[8][256];
    int clmul;   /* fold with carry-less multiplies (x86 PCLMULQDQ; set by tfm_crc_init_ from cpuid) */
} tfm_crc_table;

/* The tables, and clmul = 1 where the CPU has PCLMULQDQ and SSE4.1 (allow_clmul = 0: the table path only). */
void tfm_crc_init_(tfm_crc_table *tb, int allow_clmul);
/* Running CRC-32: start with crc = 0 and feed chunks in order (zlib's crc32() values). */
uint32_t tfm_crc_update_(const tfm_crc_table *tb, uint32_t crc, const void *buf, size_t n);

#endif
