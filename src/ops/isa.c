/* Run-time choice of the kernel instruction-set path (see ops/isa.h). */
#include "ops/isa.h"
#include "tfm/core.h"
#include "tfm/kernels.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const isa_names[TFM_ISA_COUNT] = {"generic", "avx2", "avx512"};

const char *tfm_isa_str(tfm_isa isa) { return (unsigned)isa < TFM_ISA_COUNT ? isa_names[isa] : NULL; }

int tfm_isa_supported(tfm_isa isa) {
    switch (isa) {
    case TFM_ISA_GENERIC: return 1;
#if defined(__x86_64__) || defined(__i386__)
    case TFM_ISA_AVX2:
        __builtin_cpu_init();
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case TFM_ISA_AVX512:
        __builtin_cpu_init();
        return tfm_avx512_built_ && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx2") &&
               __builtin_cpu_supports("fma");
#endif
    default: return 0;
    }
}

/* Decides the path from TFM_ISA and cpuid; on a bad TFM_ISA writes the reason to err and returns -1. */
static int resolve(tfm_isa *out, char *err, size_t errlen) {
    const char *env = getenv("TFM_ISA");
    if (env && *env) {
        for (int i = 0; i < TFM_ISA_COUNT; i++)
            if (!strcmp(env, isa_names[i])) {
                if (!tfm_isa_supported((tfm_isa)i)) {
                    snprintf(err, errlen, "TFM_ISA=%s: this CPU does not support it (best here: %s)", env,
                             tfm_isa_supported(TFM_ISA_AVX512) ? "avx512"
                             : tfm_isa_supported(TFM_ISA_AVX2) ? "avx2" : "generic");
                    return -1;
                }
                *out = (tfm_isa)i;
                return 0;
            }
        snprintf(err, errlen, "TFM_ISA=%s: unknown value (use avx512, avx2 or generic)", env);
        return -1;
    }
    *out = tfm_isa_supported(TFM_ISA_AVX512) ? TFM_ISA_AVX512
         : tfm_isa_supported(TFM_ISA_AVX2)   ? TFM_ISA_AVX2 : TFM_ISA_GENERIC;
    return 0;
}

static pthread_once_t isa_once = PTHREAD_ONCE_INIT;
static tfm_isa isa_chosen; /* written once under isa_once, read-only afterwards */
int tfm_isa_cache_ = -1;

static void choose_isa(void) {
    char err[160];
    if (resolve(&isa_chosen, err, sizeof err)) {
        /* A kernel is about to run and cannot report an error: stop cleanly rather than fall back to a
         * path the user did not ask for (or fault on one the CPU lacks). Programs call tfm_isa_check()
         * first to report this as an ordinary error. */
        fprintf(stderr, "tfm: %s\n", err);
        exit(2);
    }
    __atomic_store_n(&tfm_isa_cache_, (int)isa_chosen, __ATOMIC_RELEASE);
}

tfm_isa tfm_isa_active_slow_(void) {
    pthread_once(&isa_once, choose_isa);
    return isa_chosen;
}

int tfm_isa_check(void) {
    char err[160];
    tfm_isa isa;
    if (resolve(&isa, err, sizeof err)) {
        tfm_set_error("%s", err);
        return -1;
    }
    return 0;
}

const char *tfm_isa_name(void) { return tfm_isa_str(tfm_isa_active()); }
