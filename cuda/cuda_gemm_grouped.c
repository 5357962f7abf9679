/* cuda/cuda_gemm_grouped.c — the grouped GEMM op (core/backend.h
 * gemm_grouped) through cublasGemmGroupedBatchedEx (cuBLAS >= 12.5).
 *
 * Each of our groups is one cuBLAS group of group_size 1 with its own m, n,
 * k (row-major onto column-major as in cuda_gemm.c: (B, A) swapped,
 * dimensions (n, m, k)). The device pointer arrays are uploaded into the op
 * workspace (stream-ordered; the workspace only grows, and growing it
 * synchronises). Groups naming the same C run in group order: one cuBLAS
 * call per stage (stage = number of earlier groups with the same C).
 * Biases: pre-filled into C when beta == 0 (that group's beta becomes 1, as
 * cuda_gemm does), otherwise added by a kernel after the product.
 * Fallback to one cuda_gemm per group, in order, when cuBLAS has no grouped
 * kernel for the dtypes (inputs bf16 with an fp32 C: weight gradients) or a
 * group has k = 0: the results are those of the per-group loop either way.
 */
#include <limits.h>
#include <stdlib.h>

#include <cublas_v2.h>

#include "cuda/cublas_api.h"
#include "cuda_internal.h"

static cudaDataType_t gg_type(mt_dtype t) {
  return t == MT_BF16 ? CUDA_R_16BF : CUDA_R_32F;
}

void cuda_gemm_grouped(mt_backend *be, const mt_gemm_grouped_desc *d) {
  cuda_impl *im = cuda_impl_of(be);
  MT_ASSERT(d->groups >= 0 && d->a_type == d->b_type);
  MT_ASSERT(d->c_type == d->a_type || d->c_type == MT_F32);
  const int G = d->groups;
  /* bf16 C with biases and beta != 0: cuda_gemm's one-rounding path */
  int fallback = d->c_type != d->a_type || (d->bias && d->beta != 0.0f && d->c_type == MT_BF16);
  for (int g = 0; g < G; g++) {
    MT_ASSERT(d->m[g] >= 0 && d->n[g] >= 0 && d->k[g] >= 0);
    fallback |= d->k[g] == 0 && d->m[g] && d->n[g];
  }
  if (fallback || G == 1) {
    for (int g = 0; g < G; g++) {
      mt_gemm_desc e = mt_gemm_grouped_member(d, g);
      cuda_gemm(be, &e);
    }
    return;
  }
  MT_ASSERT(d->lda <= INT_MAX && d->ldb <= INT_MAX && d->ldc <= INT_MAX);
  int *stage = malloc(sizeof(int) * (size_t)G);
  const int nstage = mt_gemm_grouped_stages(d, stage);
  /* host arrays of one stage: at most G problems */
  cublasOperation_t *ta = malloc(sizeof *ta * (size_t)G), *tb = malloc(sizeof *tb * (size_t)G);
  int *mm = malloc(sizeof(int) * (size_t)G * 7);
  int *nn = mm + G, *kk = mm + 2 * G, *la = mm + 3 * G, *lb = mm + 4 * G, *lc = mm + 5 * G;
  int *gs = mm + 6 * G;
  float *al = malloc(sizeof(float) * (size_t)G * 2), *bt = al + G;
  const void **ptr = malloc(sizeof(void *) * (size_t)G * 3);
  int *after = malloc(sizeof(int) * (size_t)G);
  /* one workspace slab of pointers per stage, so no upload overwrites the
   * arrays of a call still queued */
  void **dev = cuda_workspace(be, sizeof(void *) * (size_t)G * 3 * (size_t)nstage);
  const cublasComputeType_t ct = d->a_type == MT_F32 && im->tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32
                                                                 : CUBLAS_COMPUTE_32F;
  for (int s = 0; s < nstage; s++) {
    int np = 0;
    for (int g = 0; g < G; g++) {
      if (stage[g] != s || !d->m[g] || !d->n[g]) continue;
      float beta = d->beta;
      after[np] = -1;
      const void *bias = d->bias ? d->bias[g] : NULL;
      if (bias && beta == 0.0f) {
        cudak_bias_rows(im->stream, d->c_type, d->a_type, d->c[g], bias, d->m[g], d->n[g],
                        d->ldc, 0, 1, 1);
        beta = 1.0f;
      } else if (bias) {
        after[np] = g;
      }
      /* column-major: C^T[n, m] = op(B)^T[n, k] op(A)^T[k, m] */
      ta[np] = d->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
      tb[np] = d->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
      mm[np] = d->n[g], nn[np] = d->m[g], kk[np] = d->k[g];
      la[np] = (int)d->ldb, lb[np] = (int)d->lda, lc[np] = (int)d->ldc;
      al[np] = d->alpha, bt[np] = beta, gs[np] = 1;
      ptr[np] = d->b[g], ptr[G + np] = d->a[g], ptr[2 * G + np] = d->c[g];
      np++;
    }
    if (!np) continue;
    void **ds = dev + (size_t)s * 3 * (size_t)G;
    MT_CUDA_CHECK(cudaMemcpyAsync(ds, ptr, sizeof(void *) * (size_t)G * 3,
                                  cudaMemcpyHostToDevice, im->stream));
    MT_CUBLAS_CHECK(im->blas, im->blas->GemmGroupedBatchedEx(
        (cublasHandle_t)im->cublas, ta, tb, mm, nn, kk, al, (const void *const *)ds,
        gg_type(d->b_type), la, (const void *const *)(ds + G), gg_type(d->a_type), lb, bt,
        ds + 2 * G, gg_type(d->c_type), lc, np, gs, ct));
    for (int p = 0; p < np; p++)
      if (after[p] >= 0) {
        int g = after[p];
        cudak_bias_rows(im->stream, d->c_type, d->a_type, d->c[g], d->bias[g], d->m[g], d->n[g],
                        d->ldc, 0, 1, 0);
      }
  }
  /* the host arrays are staged before cudaMemcpyAsync returns (pageable) */
  free(stage);
  free(ta);
  free(tb);
  free(mm);
  free(al);
  free(ptr);
  free(after);
}
