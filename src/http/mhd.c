/* libmicrohttpd's functions from dlopen (http/mhd.h) */
#include "http/mhd.h"

#include <dlfcn.h>

#include "tfm/core.h"

#ifndef TFM_MHD_SONAME
#define TFM_MHD_SONAME "libmicrohttpd.so.12"
#endif

int mhd_load(mhd_api *api) {
    void *lib = dlopen(TFM_MHD_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (!lib)
        return tfm_set_error("cannot load %s (%s): tfm serve needs GNU libmicrohttpd (Debian: apt-get install "
                             "libmicrohttpd12)", TFM_MHD_SONAME, dlerror()), -1;
#define MHD_LOAD(name)                                                                                         \
    if (!(*(void **)&api->name = dlsym(lib, "MHD_" #name)))                                                   \
        return tfm_set_error("%s has no MHD_" #name " (too old a libmicrohttpd?)", TFM_MHD_SONAME), -1;
    MHD_FUNCTIONS(MHD_LOAD)
#undef MHD_LOAD
    return 0;
}
