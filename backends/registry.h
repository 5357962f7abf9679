/* backends/registry.h — the backend registry: the one place that knows which
 * backends are compiled in (cpu/, cuda/) and maps a device name to its
 * constructor. core/backend.h defines only the op table every backend fills;
 * the trainer, tests and tools create backends through this header.
 *
 * Layering: main.c, trainer/, tests and tools -> backends/ -> {cpu/, cuda/}
 * -> core/. Nothing below backends/ includes it. */
#ifndef MT_BACKENDS_REGISTRY_H
#define MT_BACKENDS_REGISTRY_H

#include <stddef.h>

#include "core/backend.h"

/* Process-wide set-up for the backend of `opt->device`, done ONCE at start-up
 * (main.c; tests and tools call it before their first mt_backend_create),
 * before any backend exists and before any BLAS call is in flight:
 *  - "cpu": the OpenBLAS kernel choice (env MEGATRAIN_OPENBLAS_CORETYPE; may
 *    setenv OPENBLAS_CORETYPE and re-initialise OpenBLAS), the OpenMP thread
 *    count (opt->num_threads > 0; 0 keeps the library default) and OpenBLAS's
 *    own thread count (1, or num_threads with MEGATRAIN_CPU_GEMM=blas);
 *  - "cuda" or an unknown device: nothing (mt_backend_create reports the
 *    unknown name).
 * Only opt->device and opt->num_threads are read. Not thread-safe: call it
 * from the main thread outside parallel regions. Calling it again with the
 * same options changes nothing. */
void mt_backends_process_init(const mt_backend_options *opt);

/* Create the backend of opt->device ("cpu" or "cuda") with storage dtype
 * opt->dtype. Returns NULL with a message in err[errlen] when the device is
 * unknown ("unknown device 'X' (expected \"cpu\" or \"cuda\")"), when the
 * dtype is not supported by the backend, or when the device is unusable (no
 * GPU, or a CUDA=0 build). Destroy with mt_backend_destroy (core/backend.h).
 * Per process, not collective. */
mt_backend *mt_backend_create(const mt_backend_options *opt, char *err, size_t errlen);

#endif
