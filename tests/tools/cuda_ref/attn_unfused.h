/* tests/tools/cuda_ref/attn_unfused.h — the UNFUSED causal attention on the
 * GPU ([b, np, s, s] probabilities): the reference the fused op
 * (cuda/cuda_flash_attn.cu) is compared with by tests/tools/cuda_parity.c
 * and timed against by bench/bench_flash_gpu.c. Test code: built only into
 * those two programs, in CUDA builds (Makefile, CUDA_REF_OBJS). */
#ifndef MT_TESTS_CUDA_REF_ATTN_UNFUSED_H
#define MT_TESTS_CUDA_REF_ATTN_UNFUSED_H

#include "cuda/cuda_internal.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Semantics of the former op-table entries (issue 15): ctx [s, b, np, hn]
 * and the pre-dropout softmax probs [b, np, s, s] (T) from qkv
 * [s, b, ng, np/ng + 2, hn]; dqkv (overwrite) from dctx, qkv and those
 * probs. Dropout masks: the counters of mt_attn_desc (bitwise the fused
 * op's). attn_unfused.c. */
void cuda_attn_fwd(mt_backend *be, const mt_attn_desc *d, void *ctx, void *probs,
                   const void *qkv);
void cuda_attn_bwd(mt_backend *be, const mt_attn_desc *d, void *dqkv, const void *dctx,
                   const void *qkv, const void *probs);

/* ---- kernel launchers (attn_softmax.cu) ----
 * Scores/probabilities are [pairs = b*np, s, s] (row q, column k). */
/* In place on probs (T) holding scale*QK^T: causal softmax per row (fp32
 * math), zeros above the diagonal. With p > 0 also writes pd = P * keep /
 * (1-p) (T, same layout) from the RNG counters of mt_attn_desc. */
void cudak_attn_softmax_fwd(cudaStream_t st, mt_dtype t, const mt_attn_desc *d,
                            const int64_t *ids_dev, void *probs, void *pd);
/* pd = P * keep / (1-p) (T) from saved probs. */
void cudak_attn_dropout_probs(cudaStream_t st, mt_dtype t, const mt_attn_desc *d,
                              const int64_t *ids_dev, const void *probs, void *pd);
/* ds (T) = scale * P * (dP' - rowsum(dP' * P)) causal, dP' = dP (fp32) * keep / (1-p). */
void cudak_attn_softmax_bwd(cudaStream_t st, mt_dtype t, const mt_attn_desc *d,
                            const int64_t *ids_dev, const void *probs, const float *dp,
                            void *ds);

#ifdef __cplusplus
}
#endif

#endif
