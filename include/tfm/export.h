/* TFM_API marks a function or variable of the public API. libtfm.so is built with -fvisibility=hidden, so
 * only what carries TFM_API is exported (tests/cli/exports.sh checks `nm -D` against the headers); the
 * static library libtfm.a links every symbol as before. */
#ifndef TFM_EXPORT_H
#define TFM_EXPORT_H

#if defined(__GNUC__) || defined(__clang__)
#define TFM_API __attribute__((visibility("default")))
#else
#define TFM_API
#endif

#endif
