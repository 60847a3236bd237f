/* libFuzzer entry point; FUZZ_TARGET (a string, set by the Makefile) picks the target in targets.c. */
#include <stddef.h>
#include <stdint.h>

#ifndef FUZZ_TARGET
#error "build with -DFUZZ_TARGET='\"name\"' (see the Makefile's fuzz rules)"
#endif

int tfm_fuzz_run(const char *target, const uint8_t *d, size_t n);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    (void)tfm_fuzz_run(FUZZ_TARGET, data, size);
    return 0;
}
