/* cuda/cuda_memory.c — memory of the CUDA backend: the counting allocator
 * and its pointer map, the caching pool, the op scratch (cuda_workspace, the
 * sample-id upload buffer) and the memory ops of the op table
 * (cpu/cpu_memory.c is the CPU counterpart). A file of its own so that the
 * family files, which take their scratch from here, and cuda_backend.c,
 * whose table names the family ops, never call each other both ways (make
 * check-layers, the file rule).
 *
 * Allocator: stream-ordered (cudaMallocFromPoolAsync / cudaFreeAsync on the
 * backend stream) from a caching memory pool, with a host-side
 * open-addressing map from pointer to (bytes, category) so `free` updates
 * the per-category counters exactly like cpu/ (mt_mem_account with the
 * requested byte count).
 */
#include <stdlib.h>
#include <string.h>

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

void *cuda_alloc(mt_backend *be, size_t bytes, mt_mem_cat cat) {
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

void cuda_free(mt_backend *be, void *p) {
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

/* The caching pool of device `dev` (a cudaMemPool_t; NULL when the device
 * or driver has no memory pools: the allocator then uses cudaMalloc). */
void *cuda_pool_create(int dev) {
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

void cuda_memcpy_h2d(mt_backend *be, void *dst, const void *src, size_t bytes) {
  if (!bytes) return;
  /* The host buffer may be reused once this returns: pageable copies are
   * staged before cudaMemcpyAsync returns; for pinned memory we wait. */
  struct cudaPointerAttributes a;
  int pinned = cudaPointerGetAttributes(&a, src) == cudaSuccess && a.type == cudaMemoryTypeHost;
  cudaGetLastError();
  MT_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, cuda_impl_of(be)->stream));
  if (pinned) MT_CUDA_CHECK(cudaStreamSynchronize(cuda_impl_of(be)->stream));
}

void cuda_memcpy_d2h(mt_backend *be, void *dst, const void *src, size_t bytes) {
  if (!bytes) return;
  cudaStream_t st = cuda_impl_of(be)->stream;
  MT_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, st));
  MT_CUDA_CHECK(cudaStreamSynchronize(st));
}

void cuda_memcpy_d2d(mt_backend *be, void *dst, const void *src, size_t bytes) {
  if (!bytes || dst == src) return;
  MT_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, cuda_impl_of(be)->stream));
}

void cuda_memset0(mt_backend *be, void *dst, size_t bytes) {
  if (!bytes) return;
  MT_CUDA_CHECK(cudaMemsetAsync(dst, 0, bytes, cuda_impl_of(be)->stream));
}

void cuda_synchronize(mt_backend *be) {
  MT_CUDA_CHECK(cudaStreamSynchronize(cuda_impl_of(be)->stream));
}

void cuda_scratch_free(mt_backend *be) {
  cuda_impl *im = cuda_impl_of(be);
  if (im->ws) cuda_free(be, im->ws);
  if (im->rope_tab) cuda_free(be, im->rope_tab);
  im->rope_tab = NULL, im->rope_pos = 0;
  if (im->ids_dev) dev_free(im, im->ids_dev);
  if (im->ids_pin) cudaFreeHost(im->ids_pin); /* synchronises: no upload reads it */
  im->ws = NULL, im->ws_bytes = 0;
  im->ids_dev = NULL, im->ids_cap = 0;
  im->ids_pin = NULL, im->ids_next = 0;
}
