/* tfm version: the single source of truth (the Makefile reads the three numbers from this file for the
 * shared library's name, libtfm.so.MAJOR.MINOR.PATCH with soname libtfm.so.MAJOR, and for tfm.pc).
 *
 * Numbering (semantic versioning): MAJOR changes when the public API or ABI in include/tfm/ breaks,
 * MINOR when something is added, PATCH for fixes. While MAJOR is 0 the API is still settling: any MINOR
 * release may break it (the soname stays libtfm.so.0, so rebuild programs against a new 0.MINOR).
 * Checkpoint files carry their own format version (docs/FORMAT.md), independent of this one. */
#ifndef TFM_VERSION_H
#define TFM_VERSION_H

#include "tfm/export.h"

#define TFM_VERSION_MAJOR 0
#define TFM_VERSION_MINOR 9
#define TFM_VERSION_PATCH 0

#define TFM_VERSION_STR_(x) #x
#define TFM_VERSION_STR(x) TFM_VERSION_STR_(x)
/* "0.9.0" */
#define TFM_VERSION_STRING \
    TFM_VERSION_STR(TFM_VERSION_MAJOR) "." TFM_VERSION_STR(TFM_VERSION_MINOR) "." TFM_VERSION_STR(TFM_VERSION_PATCH)
/* One number for compile-time checks: #if TFM_VERSION >= TFM_VERSION_AT(0, 9, 0) */
#define TFM_VERSION_AT(major, minor, patch) ((major) * 10000 + (minor) * 100 + (patch))
#define TFM_VERSION TFM_VERSION_AT(TFM_VERSION_MAJOR, TFM_VERSION_MINOR, TFM_VERSION_PATCH)

/* The version of the library linked at run time ("0.9.0"); differs from TFM_VERSION_STRING when a program
 * built against one release's headers runs with another's libtfm.so. */
TFM_API const char *tfm_version_string(void);

#endif
