/* cuda/cuda_backend.c — the CUDA backend: creation (on the GPU chosen by
 * cuda_device.c) and destruction, the counting allocator, memory ops, host
 * sides of the reductions, and the op table (see cuda/cuda_internal.h for
 * the file map).
 *
 * Allocator: stream-ordered (cudaMallocFromPoolAsync / cudaFreeAsync on the
 * backend stream) from a caching memory pool, with a host-side
 * open-addressing map from pointer to (bytes, category) so `free` updates
 * the per-category counters exactly like cpu/ (mt_mem_account with the
 * requested byte count).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_backend.h"
#include "cuda_device.h"
#include "cuda_internal.h"

#define CUDA_TOMB ((void *)1)

/* ---- pointer map ----
 * Open addressing with linear probing and tombstones. Capacity follows the
 * LIVE entries only: when live + tombstones would pass 1/2 of the capacity,
 * the map is rebuilt at the smallest power of two (>= 256) that holds the
 * live entries at load <= 1/4, so a steady alloc/free pattern (ZeRO's
 * per-segment buffers) rehashes at constant size instead of growing with
 * the number of allocations ever made. Amortised O(1): a rebuild of
 * capacity C follows at least C/4 inserts. */

static size_t rec_hash(const void *p, size_t cap) {
  uint64_t x = (uint64_t)(uintptr_t)p;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  return (size_t)x & (cap - 1);
}

static void rec_insert_raw(cuda_alloc_rec *recs, size_t cap, void *p, size_t bytes, int cat) {
  size_t i = rec_hash(p, cap);
  while (recs[i].ptr && recs[i].ptr != CUDA_TOMB) i = (i + 1) & (cap - 1);
  recs[i].ptr = p;
  recs[i].bytes = bytes;
  recs[i].cat = cat;
}

/* Rebuild the map at the capacity its live entries call for (drops tombs). */
static void rec_rehash(cuda_impl *im) {
  size_t ncap = 256;
  while ((im->rec_live + 1) * 4 > ncap) ncap *= 2;
  cuda_alloc_rec *n = mt_xcalloc(ncap, sizeof *n);
  for (size_t i = 0; i < im->rec_cap; i++)
    if (im->recs[i].ptr && im->recs[i].ptr != CUDA_TOMB)
      rec_insert_raw(n, ncap, im->recs[i].ptr, im->recs[i].bytes, im->recs[i].cat);
  free(im->recs);
  im->recs = n;
  im->rec_cap = ncap;
  im->rec_used = im->rec_live;
}

static void rec_insert(cuda_impl *im, void *p, size_t bytes, int cat) {
  /* An insert may reuse a tombstone, but count it as a fresh slot: the
   * bound then also limits probe lengths through tombstones. */
  if ((im->rec_used + 1) * 2 > im->rec_cap) rec_rehash(im);
  rec_insert_raw(im->recs, im->rec_cap, p, bytes, cat);
  im->rec_used++;
  im->rec_live++;
}

/* Remove p from the map; returns its record (ptr NULL when unknown). */
static cuda_alloc_rec rec_remove(cuda_impl *im, void *p) {
  cuda_alloc_rec out = {0};
  if (!im->rec_cap) return out;
  size_t i = rec_hash(p, im->rec_cap);
  while (im->recs[i].ptr) {
    if (im->recs[i].ptr == p) {
      out = im->recs[i];
      im->recs[i].ptr = CUDA_TOMB; /* rec_used still counts it until a rehash */
      im->rec_live--;
      return out;
    }
    i = (i + 1) & (im->rec_cap - 1);
  }
  return out;
}

/* ---- memory ops ----
 * Stream-ordered: cudaMallocFromPoolAsync / cudaFreeAsync on the backend's
 * stream from a private pool whose release threshold is UINT64_MAX, so freed
 * blocks stay cached in the pool and an alloc/free never synchronises the
 * device (cudaFree does). Every user of a block runs on the backend stream
 * (or on the legacy default stream, which the blocking backend stream is
 * ordered with), so the stream order makes reuse safe. Without pool support
 * (im->pool NULL) plain cudaMalloc/cudaFree. On an allocation failure the
 * pool's cached blocks are returned to the device (cudaMemPoolTrimTo after a
 * stream synchronisation) and the allocation is tried once more. */

static cudaError_t dev_malloc(cuda_impl *im, void **p, size_t bytes) {
  if (!im->pool) return cudaMalloc(p, bytes);
  return cudaMallocFromPoolAsync(p, bytes, (cudaMemPool_t)im->pool, im->stream);
}

/* Frees a dev_malloc block (stream-ordered with a pool: no device-wide
 * synchronisation). */
static void dev_free(cuda_impl *im, void *p) {
  if (!p) return;
  if (im->pool)
    MT_CUDA_CHECK(cudaFreeAsync(p, im->stream));
  else
    MT_CUDA_CHECK(cudaFree(p));
}

/* dev_malloc, and on an allocation failure with a pool: the pool's cached
 * blocks returned to the device (after a stream synchronisation: the
 * stream-ordered frees have run) and one more try. */
static cudaError_t dev_malloc_retry(cuda_impl *im, void **p, size_t bytes) {
  cudaError_t e = dev_malloc(im, p, bytes);
  if (e == cudaErrorMemoryAllocation && im->pool) {
    cudaGetLastError();
    MT_CUDA_CHECK(cudaStreamSynchronize(im->stream));
    MT_CUDA_CHECK(cudaMemPoolTrimTo((cudaMemPool_t)im->pool, 0));
    e = dev_malloc(im, p, bytes);
  }
  return e;
}

static void *cuda_alloc(mt_backend *be, size_t bytes, mt_mem_cat cat) {
  MT_ASSERT(cat >= 0 && cat < MT_MEM_NCAT);
  cuda_impl *im = cuda_impl_of(be);
  void *p = NULL;
  size_t req = bytes ? bytes : 1;
  cudaError_t e = dev_malloc_retry(im, &p, req);
  if (e != cudaSuccess) {
    size_t fr = 0, tot = 0;
    cudaGetLastError();
    cudaMemGetInfo(&fr, &tot);
    mt_fatal("cuda backend: out of memory allocating %zu bytes (%s): %s; device %d has %zu of "
             "%zu bytes free, this backend holds %zu",
             bytes, mt_mem_cat_name(cat), cudaGetErrorName(e), im->device, fr, tot,
             be->mem.live_total);
  }
  rec_insert(im, p, bytes, (int)cat);
  mt_mem_account(&be->mem, cat, (int64_t)bytes);
  return p;
}

static void cuda_free(mt_backend *be, void *p) {
  if (!p) return;
  cuda_impl *im = cuda_impl_of(be);
  cuda_alloc_rec r = rec_remove(im, p);
  if (!r.ptr) mt_fatal("cuda backend: free of %p, which this backend did not allocate", p);
  if (im->pool)
    MT_CUDA_CHECK(cudaFreeAsync(p, im->stream));
  else
    MT_CUDA_CHECK(cudaFree(p));
  mt_mem_account(&be->mem, (mt_mem_cat)r.cat, -(int64_t)r.bytes);
}

/* The caching pool of device `dev` (NULL with a reason when the device or
 * driver has no memory pools: the allocator then uses cudaMalloc). */
static cudaMemPool_t pool_create(int dev) {
  int supported = 0;
  if (cudaDeviceGetAttribute(&supported, cudaDevAttrMemoryPoolsSupported, dev) != cudaSuccess ||
      !supported) {
    cudaGetLastError();
    return NULL;
  }
  struct cudaMemPoolProps pp;
  memset(&pp, 0, sizeof pp);
  pp.allocType = cudaMemAllocationTypePinned;
  pp.handleTypes = cudaMemHandleTypeNone;
  pp.location.type = cudaMemLocationTypeDevice;
  pp.location.id = dev;
  cudaMemPool_t pool = NULL;
  if (cudaMemPoolCreate(&pool, &pp) != cudaSuccess) {
    cudaGetLastError();
    return NULL;
  }
  uint64_t keep = UINT64_MAX; /* never release freed blocks at a sync */
  if (cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep) != cudaSuccess) {
    cudaGetLastError();
    cudaMemPoolDestroy(pool);
    return NULL;
  }
  return pool;
}

void *cuda_workspace(mt_backend *be, size_t bytes) {
  cuda_impl *im = cuda_impl_of(be);
  if (bytes > im->ws_bytes) {
    cuda_free(be, im->ws);
    im->ws = cuda_alloc(be, bytes, MT_MEM_WORKSPACE);
    im->ws_bytes = bytes;
    be->mem.op_scratch = bytes;
  }
  return im->ws;
}

const int64_t *cuda_upload_ids(mt_backend *be, const int64_t *ids_host, int b) {
  cuda_impl *im = cuda_impl_of(be);
  if (b > im->ids_cap) { /* grows once or twice per run */
    const int cap = b < 64 ? 64 : b;
    MT_CUDA_CHECK(cudaStreamSynchronize(im->stream)); /* no queued upload reads the old ring */
    dev_free(im, im->ids_dev);
    im->ids_dev = NULL;
    if (im->ids_pin) MT_CUDA_CHECK(cudaFreeHost(im->ids_pin));
    im->ids_pin = NULL;
    cudaError_t e = dev_malloc_retry(im, (void **)&im->ids_dev, (size_t)cap * sizeof(int64_t));
    if (e != cudaSuccess)
      mt_fatal("cuda backend: out of memory allocating %zu bytes for the sample ids: %s",
               (size_t)cap * sizeof(int64_t), cudaGetErrorName(e));
    MT_CUDA_CHECK(cudaMallocHost((void **)&im->ids_pin,
                                 (size_t)cap * CUDA_IDS_RING * sizeof(int64_t)));
    im->ids_cap = cap;
    im->ids_next = 0;
  }
  const int k = im->ids_next;
  im->ids_next = (k + 1) % CUDA_IDS_RING;
  int64_t *slot = im->ids_pin + (size_t)k * (size_t)im->ids_cap;
  /* the slot's previous upload has run (normally long ago): then rewrite it */
  MT_CUDA_CHECK(cudaEventSynchronize(im->ids_ev[k]));
  memcpy(slot, ids_host, (size_t)b * sizeof(int64_t));
  MT_CUDA_CHECK(cudaMemcpyAsync(im->ids_dev, slot, (size_t)b * sizeof(int64_t),
                                cudaMemcpyHostToDevice, im->stream));
  MT_CUDA_CHECK(cudaEventRecord(im->ids_ev[k], im->stream));
  return im->ids_dev;
}

static void cuda_memcpy_h2d(mt_backend *be, void *dst, const void *src, size_t bytes) {
  if (!bytes) return;
  /* The host buffer may be reused once this returns: pageable copies are
   * staged before cudaMemcpyAsync returns; for pinned memory we wait. */
  struct cudaPointerAttributes a;
  int pinned = cudaPointerGetAttributes(&a, src) == cudaSuccess && a.type == cudaMemoryTypeHost;
  cudaGetLastError();
  MT_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, cuda_impl_of(be)->stream));
  if (pinned) MT_CUDA_CHECK(cudaStreamSynchronize(cuda_impl_of(be)->stream));
}

static void cuda_memcpy_d2h(mt_backend *be, void *dst, const void *src, size_t bytes) {
  if (!bytes) return;
  cudaStream_t st = cuda_impl_of(be)->stream;
  MT_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, st));
  MT_CUDA_CHECK(cudaStreamSynchronize(st));
}

static void cuda_memcpy_d2d(mt_backend *be, void *dst, const void *src, size_t bytes) {
  if (!bytes || dst == src) return;
  MT_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, cuda_impl_of(be)->stream));
}

static void cuda_memset0(mt_backend *be, void *dst, size_t bytes) {
  if (!bytes) return;
  MT_CUDA_CHECK(cudaMemsetAsync(dst, 0, bytes, cuda_impl_of(be)->stream));
}

static void cuda_synchronize(mt_backend *be) {
  MT_CUDA_CHECK(cudaStreamSynchronize(cuda_impl_of(be)->stream));
}

/* ---- thin wrappers: backend -> stream + dtype ---- */
#define ST(be) (cuda_impl_of(be)->stream)

static void cuda_init_normal(mt_backend *be, void *dst, int64_t rows, int64_t cols,
                             int64_t ld_global, int64_t row_offset, int64_t col_offset,
                             mt_rng_key_t key, float std) {
  cudak_init_normal(ST(be), be->dtype, dst, rows, cols, ld_global, row_offset, col_offset, key, std);
}
static void cuda_fill(mt_backend *be, void *dst, mt_dtype t, float value, int64_t n) {
  cudak_fill(ST(be), t, dst, value, n);
}
static void cuda_cast(mt_backend *be, void *dst, mt_dtype dst_t, const void *src, mt_dtype src_t,
                      int64_t n) {
  if (dst_t == src_t) {
    cuda_memcpy_d2d(be, dst, src, (size_t)n * mt_dtype_size(dst_t));
    return;
  }
  cudak_cast(ST(be), dst, dst_t, src, src_t, n);
}
static void cuda_bias_grad(mt_backend *be, float *db, const void *dout, int64_t rows, int64_t n) {
  if (rows <= 0 || n <= 0) return;
  int64_t nch = (rows + CUDA_LN_CHUNK - 1) / CUDA_LN_CHUNK;
  float *part = cuda_workspace(be, (size_t)(nch * n) * sizeof(float));
  cudak_bias_grad(ST(be), be->dtype, db, dout, rows, n, part);
}
static void cuda_layernorm_fwd(mt_backend *be, void *out, float *mean, float *rstd,
                               const void *in, const void *w, const void *b, int64_t rows,
                               int64_t h, float eps) {
  cudak_layernorm_fwd(ST(be), be->dtype, out, mean, rstd, in, w, b, rows, h, eps);
}
static void cuda_layernorm_bwd(mt_backend *be, void *din, float *dw, float *db, const void *dout,
                               const void *in, const void *w, const float *mean,
                               const float *rstd, int64_t rows, int64_t h) {
  if (rows <= 0 || h <= 0) return;
  int64_t nch = (rows + CUDA_LN_CHUNK - 1) / CUDA_LN_CHUNK;
  float *part = cuda_workspace(be, (size_t)(2 * nch * h) * sizeof(float));
  cudak_layernorm_bwd(ST(be), be->dtype, din, dw, db, dout, in, w, mean, rstd, rows, h, part);
}
static void cuda_gelu_fwd(mt_backend *be, void *out, const void *in, int64_t n) {
  cudak_gelu_fwd(ST(be), be->dtype, out, in, n);
}
static void cuda_gelu_bwd(mt_backend *be, void *din, const void *in, const void *dout, int64_t n) {
  cudak_gelu_bwd(ST(be), be->dtype, din, in, dout, n);
}
static void cuda_dropout_add_fwd(mt_backend *be, const mt_dropout_desc *d, void *out,
                                 const void *x, const void *residual) {
  const int64_t *ids = d->p > 0.0f ? cuda_upload_ids(be, d->sample_ids, d->b) : NULL;
  cudak_dropout_add(ST(be), be->dtype, d, ids, out, x, residual);
}
static void cuda_dropout_bwd(mt_backend *be, const mt_dropout_desc *d, void *dx, const void *dout) {
  if (d->p <= 0.0f) {
    cuda_memcpy_d2d(be, dx, dout, (size_t)d->s * d->b * d->h * mt_dtype_size(be->dtype));
    return;
  }
  const int64_t *ids = cuda_upload_ids(be, d->sample_ids, d->b);
  cudak_dropout_bwd(ST(be), be->dtype, d, ids, dx, dout);
}
static void cuda_embedding_fwd(mt_backend *be, void *out, const int32_t *tokens, int64_t n,
                               const void *w, int64_t v_start, int64_t v_end, int64_t h) {
  cudak_embedding_fwd(ST(be), be->dtype, out, tokens, n, w, v_start, v_end, h);
}
static void cuda_embedding_bwd(mt_backend *be, float *dw, const int32_t *tokens, int64_t n,
                               const void *dout, int64_t v_start, int64_t v_end, int64_t h) {
  cudak_embedding_bwd(ST(be), be->dtype, dw, tokens, n, dout, v_start, v_end, h);
}
static void cuda_pos_embedding_fwd(mt_backend *be, void *x, const void *wpe, int64_t s,
                                   int64_t b, int64_t h, int64_t s_offset) {
  cudak_pos_embedding_fwd(ST(be), be->dtype, x, wpe, s, b, h, s_offset);
}
static void cuda_pos_embedding_bwd(mt_backend *be, float *dwpe, const void *dout, int64_t s,
                                   int64_t b, int64_t h, int64_t s_offset) {
  cudak_pos_embedding_bwd(ST(be), be->dtype, dwpe, dout, s, b, h, s_offset);
}
static void cuda_xent_max(mt_backend *be, float *row_max, const void *logits, int64_t n,
                          int64_t vl, int64_t valid) {
  MT_ASSERT(valid <= vl);
  cudak_xent_max(ST(be), be->dtype, row_max, logits, n, vl, valid);
}
static void cuda_xent_stats(mt_backend *be, float *sumexp, float *tgt_logit, const void *logits,
                            const float *row_max, const int32_t *targets, int64_t n, int64_t vl,
                            int64_t valid, int64_t v_start) {
  cudak_xent_stats(ST(be), be->dtype, sumexp, tgt_logit, logits, row_max, targets, n, vl, valid,
                   v_start);
}
static void cuda_xent_loss(mt_backend *be, float *loss, const float *row_max, const float *sumexp,
                           const float *tgt_logit, int64_t n) {
  cudak_xent_loss(ST(be), loss, row_max, sumexp, tgt_logit, n);
}
static void cuda_xent_bwd(mt_backend *be, void *logits, const float *row_max, const float *sumexp,
                          const int32_t *targets, int64_t n, int64_t vl, int64_t valid,
                          int64_t v_start, float scale) {
  cudak_xent_bwd(ST(be), be->dtype, logits, row_max, sumexp, targets, n, vl, valid, v_start, scale);
}
static void cuda_add(mt_backend *be, void *out, const void *a, const void *b, int64_t n) {
  cudak_add(ST(be), be->dtype, out, a, b, n);
}
static void cuda_axpy_f32(mt_backend *be, float *y, float alpha, const float *x, int64_t n) {
  cudak_axpy(ST(be), y, alpha, x, n);
}
static void cuda_scale_f32(mt_backend *be, float *x, float alpha, int64_t n) {
  cudak_scale(ST(be), x, alpha, n);
}
static double cuda_reduce(mt_backend *be, const float *x, int64_t n, int squares) {
  cuda_impl *im = cuda_impl_of(be);
  if (n <= 0) return 0.0;
  cudak_reduce(im->stream, x, n, squares, im->red_dev, NULL);
  MT_CUDA_CHECK(cudaMemcpyAsync(im->red_host, im->red_dev + CUDA_RED_BLOCKS, sizeof(double),
                                cudaMemcpyDeviceToHost, im->stream));
  MT_CUDA_CHECK(cudaStreamSynchronize(im->stream));
  return im->red_host[0];
}
static double cuda_sumsq_f32(mt_backend *be, const float *x, int64_t n) {
  return cuda_reduce(be, x, n, 1);
}
static double cuda_sum_f32(mt_backend *be, const float *x, int64_t n) {
  return cuda_reduce(be, x, n, 0);
}
/* The same two kernels as sumsq_f32 (so the same double), the final one
 * adding to *acc on the stream: no host round trip. n = 0 adds 0.0, as the
 * cpu backend does (x + 0.0 == x bitwise except -0.0, which acc never is). */
static void cuda_sumsq_acc_f32(mt_backend *be, double *acc, const float *x, int64_t n) {
  if (n <= 0) return;
  cuda_impl *im = cuda_impl_of(be);
  cudak_reduce(im->stream, x, n, 1, im->red_dev, acc);
}
static void cuda_moe_gather_rows(mt_backend *be, void *dst, const void *src, const int32_t *idx,
                                 int64_t n, int64_t h) {
  cudak_moe_gather_rows(ST(be), be->dtype, dst, src, idx, n, h);
}
static void cuda_moe_combine_fwd(mt_backend *be, void *y, const void *src, const int32_t *slot,
                                 const float *w, int64_t n_tok, int k, int64_t h) {
  cudak_moe_combine_fwd(ST(be), be->dtype, y, src, slot, w, n_tok, k, h);
}
static void cuda_moe_combine_bwd(mt_backend *be, void *dsrc, float *dw, const void *dy,
                                 const void *src, const int32_t *slot, const float *w,
                                 int64_t n_tok, int k, int64_t h) {
  cudak_moe_combine_bwd(ST(be), be->dtype, dsrc, dw, dy, src, slot, w, n_tok, k, h);
}
/* Step constants (bias corrections in double, rounded to float) from
 * mt_adamw_coef_make, exactly as cpu_adamw. */
static void cuda_adamw(mt_backend *be, const mt_adamw_hparams *hp, float *master, float *m,
                       float *v, const float *grad, void *param_lowp, int64_t n) {
  MT_ASSERT(hp->step >= 1);
  const mt_adamw_coef c = mt_adamw_coef_make(hp->lr, hp->beta1, hp->beta2, hp->eps,
                                             hp->weight_decay, hp->grad_scale, hp->step);
  cudak_adamw(ST(be), be->dtype, c, master, m, v, grad, param_lowp, n);
}

static const mt_backend_ops cuda_ops = {
    .alloc = cuda_alloc,
    .free = cuda_free,
    .memcpy_h2d = cuda_memcpy_h2d,
    .memcpy_d2h = cuda_memcpy_d2h,
    .memcpy_d2d = cuda_memcpy_d2d,
    .memset0 = cuda_memset0,
    .synchronize = cuda_synchronize,
    .init_normal = cuda_init_normal,
    .fill = cuda_fill,
    .cast = cuda_cast,
    .gemm = cuda_gemm,
    .gemm_grouped = cuda_gemm_grouped,
    .bias_grad = cuda_bias_grad,
    .layernorm_fwd = cuda_layernorm_fwd,
    .layernorm_bwd = cuda_layernorm_bwd,
    .rmsnorm_fwd = cuda_rmsnorm_fwd,
    .rmsnorm_bwd = cuda_rmsnorm_bwd,
    .swiglu_fwd = cuda_swiglu_fwd,
    .swiglu_bwd = cuda_swiglu_bwd,
    .rope_fwd = cuda_rope_fwd,
    .rope_bwd = cuda_rope_bwd,
    .qknorm_fwd = cuda_qknorm_fwd,
    .qknorm_bwd = cuda_qknorm_bwd,
    .gelu_fwd = cuda_gelu_fwd,
    .gelu_bwd = cuda_gelu_bwd,
    .flash_attn_fwd = cuda_flash_attn_fwd,
    .attn_merge = cuda_attn_merge,
    .flash_attn_bwd = cuda_flash_attn_bwd,
    .dropout_add_fwd = cuda_dropout_add_fwd,
    .dropout_bwd = cuda_dropout_bwd,
    .embedding_fwd = cuda_embedding_fwd,
    .embedding_bwd = cuda_embedding_bwd,
    .pos_embedding_fwd = cuda_pos_embedding_fwd,
    .pos_embedding_bwd = cuda_pos_embedding_bwd,
    .xent_max = cuda_xent_max,
    .xent_stats = cuda_xent_stats,
    .xent_loss = cuda_xent_loss,
    .xent_bwd = cuda_xent_bwd,
    .add = cuda_add,
    .axpy_f32 = cuda_axpy_f32,
    .scale_f32 = cuda_scale_f32,
    .sumsq_f32 = cuda_sumsq_f32,
    .sum_f32 = cuda_sum_f32,
    .sumsq_acc_f32 = cuda_sumsq_acc_f32,
    .moe_gather_rows = cuda_moe_gather_rows,
    .moe_combine_fwd = cuda_moe_combine_fwd,
    .moe_combine_bwd = cuda_moe_combine_bwd,
    .adamw = cuda_adamw,
};

const mt_backend_ops *mt_cuda_backend_ops(void) { return &cuda_ops; }

/* ---- creation / destruction ---- */

static void cuda_destroy(mt_backend *be) {
  if (!be) return;
  cuda_impl *im = cuda_impl_of(be);
  if (im) {
    if (im->stream) cudaStreamSynchronize(im->stream);
    if (im->ws) cuda_free(be, im->ws);
    if (im->ids_dev) dev_free(im, im->ids_dev);
    if (im->ids_pin) cudaFreeHost(im->ids_pin);
    for (int k = 0; k < CUDA_IDS_RING; k++)
      if (im->ids_ev[k]) cudaEventDestroy(im->ids_ev[k]);
    if (im->stream) cudaStreamSynchronize(im->stream); /* stream-ordered frees done */
    if (im->red_dev) cudaFree(im->red_dev);
    if (im->red_host) cudaFreeHost(im->red_host);
    cuda_blas_destroy(im);
    if (im->stream) cudaStreamDestroy(im->stream);
    /* Blocks still live in the pool (not freed by the caller) go with it. */
    if (im->pool) cudaMemPoolDestroy((cudaMemPool_t)im->pool);
    free(im->recs);
    free(im);
  }
  free(be);
}

/* is_device_ptr (core/backend.h): device or managed memory. */
static int cuda_is_device_ptr(const mt_backend *be, const void *p) {
  (void)be;
  struct cudaPointerAttributes a;
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    (void)cudaGetLastError(); /* clear the error of an unknown pointer */
    return 0;
  }
  return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
}

/* Fail creation with a message naming the CUDA error. */
static mt_backend *create_fail(mt_backend *be, cudaError_t e, const char *what, char *err,
                               size_t errlen) {
  snprintf(err, errlen, "no usable CUDA device: %s failed with %s (%s)", what,
           cudaGetErrorName(e), cudaGetErrorString(e));
  cudaGetLastError();
  cuda_destroy(be);
  return NULL;
}

mt_backend *mt_cuda_backend_create(const mt_backend_options *opt, char *err, size_t errlen) {
  mt_dtype dt = opt ? opt->dtype : MT_F32;
  if (dt != MT_F32 && dt != MT_BF16) {
    snprintf(err, errlen, "cuda backend supports fp32 or bf16 storage (requested %s)",
             mt_dtype_name(dt));
    return NULL;
  }
  char why[256];
  int dev = mt_cuda_select_device(opt ? opt->local_rank : 0, why, sizeof why);
  if (dev < 0) {
    snprintf(err, errlen, "no usable CUDA device: %s", why);
    return NULL;
  }
  cudaError_t e;
  mt_backend *be = mt_xcalloc(1, sizeof *be);
  cuda_impl *im = mt_xcalloc(1, sizeof *im);
  be->impl = im;
  be->ops = &cuda_ops;
  be->name = "cuda";
  be->dtype = dt;
  be->destroy = cuda_destroy;
  im->device = dev;
  be->is_device_ptr = cuda_is_device_ptr;
  if ((e = cudaStreamCreate(&im->stream)) != cudaSuccess)
    return create_fail(be, e, "cudaStreamCreate", err, errlen);
  be->stream = im->stream;
  im->pool = pool_create(dev);
  for (int k = 0; k < CUDA_IDS_RING; k++)
    if ((e = cudaEventCreateWithFlags(&im->ids_ev[k], cudaEventDisableTiming)) != cudaSuccess)
      return create_fail(be, e, "cudaEventCreateWithFlags", err, errlen);
  if ((e = cudaMalloc((void **)&im->red_dev, (CUDA_RED_BLOCKS + 1) * sizeof(double))) !=
      cudaSuccess)
    return create_fail(be, e, "cudaMalloc", err, errlen);
  if ((e = cudaMallocHost((void **)&im->red_host, sizeof(double))) != cudaSuccess)
    return create_fail(be, e, "cudaMallocHost", err, errlen);
  const char *tf = getenv("MEGATRAIN_CUDA_TF32");
  im->tf32 = tf && !strcmp(tf, "1");
  const char *fs = getenv("MEGATRAIN_CUDA_FLASH_SIMT");
  im->flash_simt = fs && !strcmp(fs, "1");
  if (cuda_blas_create(im, err, errlen) != 0) {
    cuda_destroy(be);
    return NULL;
  }
  return be;
}
