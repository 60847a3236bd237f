/* libmicrohttpd's functions from dlopen (http/mhd.h) */
#include "http/mhd.h"

#include <dlfcn.h>
#include <stdlib.h>

#include "tfm/core.h"

#ifndef TFM_MHD_SONAME
#define TFM_MHD_SONAME "libmicrohttpd.so.12"
#endif

int mhd_load(mhd_api *api) {
    const char *path = getenv("TFM_MHD_LIBRARY");
    if (!path || !*path) path = TFM_MHD_SONAME;
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib)
        return tfm_set_error("cannot load %s (%s): tfm serve needs GNU libmicrohttpd (Debian: apt-get install "
                             "libmicrohttpd12)", path, dlerror()), -1;
#define MHD_LOAD(name)                                                                                         \
    if (!(*(void **)&api->name = dlsym(lib, "MHD_" #name)))                                                   \
        return dlclose(lib), tfm_set_error("%s has no MHD_" #name " (not libmicrohttpd, or too old a one)", path), -1;
    MHD_FUNCTIONS(MHD_LOAD)
#undef MHD_LOAD
    return 0;
}
