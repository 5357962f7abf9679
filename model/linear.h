/* model/linear.h — the plain (single-rank) linear layer and the row-major
 * GEMM helper every model/ GEMM goes through (Megatron's
 * tensor_parallel/layers.py linear_with_grad_accumulation, without any
 * collective; the tensor-parallel wrappers live in model/tensor_parallel.h).
 *
 * Shapes: M = rows (s·b tokens of the caller's [s, b, ·] activation, or the
 * rows of one expert's block), weights [out, in] (PyTorch/Megatron layout).
 * Dtypes: activations, weights and biases in T = the backend storage dtype
 * (be->dtype); weight and bias gradients fp32 and ACCUMULATED. No
 * communication: everything runs on this rank through the op table.
 * Errors: none of its own; the backend's gemm aborts the job on a bad
 * descriptor.
 */
#ifndef MT_MODEL_LINEAR_H
#define MT_MODEL_LINEAR_H

#include <stdint.h>

#include "core/backend.h"

/* One row-major GEMM through the op table:
 *   C[m, n] = op(A) op(B) (+ beta · C) (+ bias[n])
 * op(X) = X^T when its trans flag is set; A [m, k] (or [k, m]) with leading
 * dimension lda, B [k, n] (or [n, k]) with ldb, both in T; C in c_type
 * (T or MT_F32) with ldc; alpha 1, one batch; bias [n] (T) or NULL. beta 0
 * overwrites C, beta 1 accumulates. */
void mt_linear_gemm(mt_backend *be, int ta, int tb, int64_t m, int64_t n, int64_t k,
                    const void *a, int64_t lda, const void *b, int64_t ldb, float beta, void *c,
                    int64_t ldc, mt_dtype c_type, const void *bias);

/* y[M, out] (T, overwrite) = x[M, in] @ W[out, in]^T (+ bias[out], may be NULL). */
void mt_linear_fwd(mt_backend *be, void *y, const void *x, const void *w, const void *bias,
                   int64_t M, int64_t out, int64_t in);

/* Backward of mt_linear_fwd: dW[out, in] += dy^T x (fp32, accumulate);
 * db[out] += colsum(dy) (fp32, accumulate; db may be NULL); dx[M, in]
 * (T, overwrite) = dy @ W (dx may be NULL). */
void mt_linear_bwd(mt_backend *be, void *dx, float *dw, float *db, const void *dy, const void *x,
                   const void *w, int64_t M, int64_t out, int64_t in);

#endif
