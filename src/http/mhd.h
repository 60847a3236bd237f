/* GNU libmicrohttpd, loaded by tfm serve when a server starts (dlopen) instead of linked into tfm: the library
 * brings GnuTLS and its dependencies, whose loading cost every tfm command ~4.7 ms at start (twice when tfm
 * re-executes itself for GOMP_SPINCOUNT, tfm/core.h), measured on a Zen 5: `tfm --version` 19.7 -> 6.7 ms.
 * The functions server.c calls, typed from <microhttpd.h>. */
#ifndef TFM_HTTP_MHD_H
#define TFM_HTTP_MHD_H

#include <stddef.h>

#include <microhttpd.h>

#define MHD_FUNCTIONS(X)                                                                                       \
    X(start_daemon) X(stop_daemon) X(quiesce_daemon) X(get_daemon_info) X(get_connection_info)                \
    X(lookup_connection_value) X(create_response_from_buffer) X(create_response_from_callback)                \
    X(add_response_header) X(queue_response) X(destroy_response)

typedef struct {
#define MHD_MEMBER(name) __typeof__(MHD_##name) *name;
    MHD_FUNCTIONS(MHD_MEMBER)
#undef MHD_MEMBER
} mhd_api;

/* Fills api from the library: the file TFM_MHD_LIBRARY names (the environment; a library installed elsewhere), else
 * TFM_MHD_SONAME (the Makefile's). Once loaded it stays loaded: a second load only counts a reference. 0, or -1 with
 * a tfm error naming the library or the missing function and the package to install. */
int mhd_load(mhd_api *api);

#endif
