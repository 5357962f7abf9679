/* cpu/cpu_backend.h — entry points of the CPU backend (fp32 or bf16 storage) (OpenBLAS +
 * OpenMP), called by the backend registry (backends/registry.c) only. */
#ifndef MT_CPU_BACKEND_H
#define MT_CPU_BACKEND_H

#include <stddef.h>

#include "core/backend.h"

/* Process-wide CPU set-up, once before the first cpu backend (through
 * mt_backends_process_init): re-selects OpenBLAS kernels when
 * MEGATRAIN_OPENBLAS_CORETYPE asks for it (setenv OPENBLAS_CORETYPE, then
 * OpenBLAS's dynamic-arch re-initialisation), sets the OpenMP thread count
 * when num_threads > 0, and OpenBLAS's thread count: 1 when GEMMs are split
 * over OpenMP threads (the default), num_threads (if > 0) with
 * MEGATRAIN_CPU_GEMM=blas. */
void mt_cpu_process_init(int num_threads);

/* Create the CPU backend with storage dtype T = opt->dtype: MT_F32, or
 * MT_BF16 (bf16 storage, fp32 compute and accumulation, every T output
 * rounded once to nearest even as cuda/ rounds: cpu_bf16.h). Any other dtype:
 * NULL with "cpu backend stores fp32 or bf16 (requested <dtype>)" in err.
 * Reads MEGATRAIN_CPU_GEMM, MEGATRAIN_CPU_GEMM_SLABS and MEGATRAIN_CPU_PAR_MIN
 * and records the OpenMP thread count in effect; changes no process state. */
mt_backend *mt_cpu_backend_create(const mt_backend_options *opt, char *err, size_t errlen);

#endif
