/* The library's version at run time (compare with TFM_VERSION_STRING, the headers' version). */
#include "tfm/version.h"

const char *tfm_version_string(void) { return TFM_VERSION_STRING; }
