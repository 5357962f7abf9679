/* parallel/nccl_api.c — NCCL loaded at run time (nccl_api.h): dlopen of
 * libnccl.so.2, dlsym of every function the NCCL engine calls. Without
 * MT_HAVE_NCCL only mt_nccl_api_close exists (a no-op: no table is ever
 * made). */
#include <stdlib.h>

#include "comm_impl.h"

#ifdef MT_HAVE_NCCL
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>

#include "nccl_api.h"

#define WHO "parallel.distributed_backend \"nccl\": "
#define OR_MPI "or set parallel.distributed_backend to \"mpi\" (staged through host memory)"
#define FIX "put NCCL's lib folder on LD_LIBRARY_PATH, " OR_MPI
#define FIX_NEWER                                                                          \
  "the NCCL engine needs NCCL 2.10 or newer: put a newer NCCL's lib folder on "            \
  "LD_LIBRARY_PATH, " OR_MPI

mt_nccl_api *mt_nccl_api_open(const char *library, char *err, size_t errlen) {
  /* RTLD_NODELETE: dlclose keeps the code mapped — NCCL may leave threads
   * running after its last communicator is destroyed */
  void *lib = dlopen(library, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (!lib) {
    const char *why = dlerror();
    snprintf(err, errlen, WHO "cannot load %s (%s); " FIX, library, why ? why : "no reason given");
    return NULL;
  }
  mt_nccl_api *a = mt_xcalloc(1, sizeof *a);
  a->lib = lib;
  struct link_map *lm = NULL;
  a->path = mt_xstrdup(dlinfo(lib, RTLD_DI_LINKMAP, &lm) == 0 && lm && lm->l_name[0] ? lm->l_name
                                                                                    : library);
  const char *missing = NULL;
#define MT_NCCL_API_LOAD_(f)                                                  \
  if (!missing) {                                                             \
    dlerror();                                                                \
    a->f = (__typeof__(a->f))dlsym(lib, "nccl" #f);                           \
    if (!a->f) missing = "nccl" #f;                                           \
  }
  MT_NCCL_FUNCS(MT_NCCL_API_LOAD_)
#undef MT_NCCL_API_LOAD_
  if (missing) {
    const char *why = dlerror();
    snprintf(err, errlen, WHO "%s (loaded as %s) has no %s (%s); " FIX_NEWER, a->path, library,
             missing, why ? why : "null symbol");
    mt_nccl_api_close(a);
    return NULL;
  }
  const ncclResult_t vr = a->GetVersion(&a->version);
  if (vr != ncclSuccess) {
    snprintf(err, errlen, WHO "%s (loaded as %s): ncclGetVersion failed (%s); " FIX, a->path,
             library, a->GetErrorString(vr));
    mt_nccl_api_close(a);
    return NULL;
  }
  if (a->version < MT_NCCL_MIN_VERSION) {
    snprintf(err, errlen, WHO "%s (loaded as %s) reports NCCL version code %d; " FIX_NEWER,
             a->path, library, a->version);
    mt_nccl_api_close(a);
    return NULL;
  }
  return a;
}

void mt_nccl_api_close(mt_nccl_api *a) {
  if (!a) return;
  dlclose(a->lib);
  free(a->path);
  free(a);
}

#else /* !MT_HAVE_NCCL */

void mt_nccl_api_close(struct mt_nccl_api *a) { (void)a; }

#endif
