/* cuda/cublas_api.c — cuBLAS loaded at run time (cublas_api.h). */
#include "cuda/cublas_api.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

/* The emulation (its <cublas_v2.h>: tests/cuda_emu/include) exports the functions
 * under their prototype names from its own library, linked into the
 * process; a CUDA build loads the toolkit's libcublas. */
#ifdef MT_CUDA_EMU_CUBLAS_V2_H
#define MT_CUBLAS_SYMBOL_(proto, sym) #proto
#else
#define MT_CUBLAS_SYMBOL_(proto, sym) #sym
#endif

int mt_cublas_api_open(mt_cublas_api *a, char *err, size_t errlen) {
  memset(a, 0, sizeof *a);
#ifdef MT_CUDA_EMU_CUBLAS_V2_H
  void *from = RTLD_DEFAULT;
  const char *name = "the process (the CUDA emulation's library)";
#else
  /* RTLD_NODELETE: cuBLAS may keep state past its last handle */
  void *lib = dlopen(MT_CUBLAS_LIBRARY, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (!lib) {
    const char *why = dlerror();
    snprintf(err, errlen,
             "cannot load cuBLAS (%s: %s); put the folder holding it (the CUDA toolkit's lib64, "
             "or pip's nvidia/cu13/lib) on LD_LIBRARY_PATH",
             MT_CUBLAS_LIBRARY, why ? why : "no reason given");
    return -1;
  }
  a->lib = lib;
  void *from = lib;
  const char *name = MT_CUBLAS_LIBRARY;
#endif
  const char *missing = NULL;
#define MT_CUBLAS_API_LOAD_(f, proto, sym)                                \
  if (!missing) {                                                         \
    a->f = (__typeof__(a->f))dlsym(from, MT_CUBLAS_SYMBOL_(proto, sym));  \
    if (!a->f) missing = MT_CUBLAS_SYMBOL_(proto, sym);                   \
  }
  MT_CUBLAS_FUNCS(MT_CUBLAS_API_LOAD_)
  /* issue 32: cuBLASLt, its own library of the same toolkit */
#ifndef MT_CUDA_EMU_CUBLAS_V2_H
  if (!missing) {
    a->lt_lib = dlopen(MT_CUBLASLT_LIBRARY, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (!a->lt_lib) {
      const char *why = dlerror();
      snprintf(err, errlen,
               "cannot load cuBLASLt (%s: %s); put the folder holding it (next to %s) on "
               "LD_LIBRARY_PATH",
               MT_CUBLASLT_LIBRARY, why ? why : "no reason given", MT_CUBLAS_LIBRARY);
      mt_cublas_api_close(a);
      return -1;
    }
    from = a->lt_lib;
    name = MT_CUBLASLT_LIBRARY;
  }
#endif
  MT_CUBLASLT_FUNCS(MT_CUBLAS_API_LOAD_)
#undef MT_CUBLAS_API_LOAD_
  if (missing) {
    snprintf(err, errlen,
             "%s has no %s (the cuda backend needs cuBLAS 12.5 or newer, of the toolkit it was "
             "built with: %s)",
             name, missing, MT_CUBLAS_LIBRARY);
    mt_cublas_api_close(a);
    return -1;
  }
  return 0;
}

void mt_cublas_api_close(mt_cublas_api *a) {
  if (a->lib) dlclose(a->lib);
  if (a->lt_lib) dlclose(a->lt_lib);
  memset(a, 0, sizeof *a);
}
