/* parallel/zero.h — ZeRO flat-buffer sharding (Rajbhandari et al. 2020,
 * "ZeRO: Memory Optimizations Toward Training Trillion Parameter Models";
 * Megatron's distributed optimizer). Knows nothing of the Transformer: it
 * slices a flat buffer of `flat_numel` elements into segments, buckets and
 * per-rank shards, and moves those slices over a data-parallel group.
 *
 * Layout (docs/zero.md):
 *  - A SEGMENT is a contiguous range [start, start + len) of the flat buffer
 *    that the caller gathers or reduces as one unit (the model passes one
 *    segment per layer; elements between segments are never sharded, never
 *    trained, and stay zero). Segments are disjoint and increasing.
 *  - Each segment is cut into BUCKETS of `bucket_size` elements (rounded down
 *    to a multiple of dp); only a segment's LAST bucket can have a length
 *    that does not divide by dp: it is padded to the next multiple of dp
 *    (padding is recorded in `padding`, holds zeros, and is never trained).
 *  - Bucket b (padded length plen_b) is split into dp equal shards of
 *    shard_len_b = plen_b / dp elements; rank r owns padded indices
 *    [r * shard_len_b, (r + 1) * shard_len_b) of every bucket. A rank's SHARD
 *    BUFFER is the concatenation of its shard of every bucket, in bucket
 *    order (shard_numel elements, identical on every rank).
 *  - A segment's WORKING buffer (ZeRO-2/3) holds the segment in flat order
 *    followed by the padding of its last bucket (padded_len elements), so a
 *    bucket's all-gather / reduce-scatter runs on it without copies.
 *
 * Collectives use MT_OP_SUM over the group given (the data-parallel group of
 * this model-parallel rank; for expert parameters, the expert-data-parallel
 * group — the layout is per buffer). Buffers are device pointers of `be`
 * (host memory on the CPU backend / MPI engine).
 */
#ifndef MT_PARALLEL_ZERO_H
#define MT_PARALLEL_ZERO_H

#include <stdint.h>

#include "../core/backend.h"
#include "comm.h"

typedef struct {
  int segment;          /* owning segment */
  int64_t flat_start;   /* first element in the flat buffer */
  int64_t len;          /* real elements */
  int64_t shard_len;    /* per-rank shard: padded length / dp */
  int64_t seg_offset;   /* start within the segment's working buffer */
  int64_t shard_offset; /* start of this bucket's shard in the shard buffer */
} mt_zero_bucket;

typedef struct {
  int64_t flat_start, len; /* the segment in the flat buffer */
  int64_t padded_len;      /* len + padding of the last bucket */
  int first_bucket, n_buckets;
  int64_t shard_offset, shard_len; /* this segment's part of the shard buffer */
} mt_zero_segment;

typedef struct {
  int dp, dp_rank;
  int64_t flat_numel;
  int64_t bucket_size;   /* elements, a multiple of dp */
  mt_zero_segment *seg;
  int n_seg;
  mt_zero_bucket *bkt;
  int n_bkt;
  int64_t shard_numel;   /* elements of every rank's shard buffer */
  int64_t sharded_numel; /* sum of segment lengths (real elements) */
  int64_t padding;       /* sum over buckets of padded - real length */
  int64_t max_bucket_padded; /* largest padded bucket length */
} mt_zero_layout;

/* Build the layout of a flat buffer of flat_numel elements with n_seg
 * segments given as bounds[2 * i] = start, bounds[2 * i + 1] = end
 * (exclusive, increasing, non-overlapping, within the buffer), bucket_size
 * elements per bucket (<= 0: one bucket per segment; rounded down to a
 * multiple of dp, at least dp), for rank dp_rank of dp ranks. Fatal on
 * inconsistent arguments (a caller bug). Free with mt_zero_layout_free. */
void mt_zero_layout_build(mt_zero_layout *L, const int64_t *bounds, int n_seg,
                          int64_t flat_numel, int64_t bucket_size, int dp, int dp_rank);
void mt_zero_layout_free(mt_zero_layout *L);

/* The real (unpadded) elements of bucket b that rank `rank` owns: flat
 * range [*lo, *hi) (empty when *lo == *hi; a rank's part of a bucket may be
 * all padding). A non-empty range starts at flat_start + rank * shard_len and
 * sits at bkt[b].shard_offset of that rank's shard buffer. */
void mt_zero_owned_range(const mt_zero_layout *L, int b, int rank, int64_t *lo, int64_t *hi);

/* ---- segment working buffers (ZeRO-2/3) ---- */

/* Reduce-scatter every bucket of segment s of the fp32 gradient working
 * buffer `work` [padded_len] (padding tail must be zero; overwritten by
 * partial sums) over g, and ADD this rank's reduced shard into
 * grad_shard[shard buffer] (accumulation across micro-batches). */
void mt_zero_reduce_scatter_segment(mt_group *g, mt_backend *be, const mt_zero_layout *L, int s,
                                    float *work, float *grad_shard);

/* All-gather every bucket of segment s: work [padded_len] (dtype t) receives
 * the concatenation of every rank's shard of each bucket, taken from
 * shard [shard buffer] (dtype t) on each rank. */
void mt_zero_allgather_segment(mt_group *g, mt_backend *be, const mt_zero_layout *L, int s,
                               const void *shard, void *work, mt_dtype t);

/* The two above started (overlap_grad_reduce / overlap_param_gather):
 * req[i] (segment s's n_buckets entries) receives bucket i's handle; after
 * mt_wait on every one, reduce-scatter _done adds the reduced shards into
 * grad_shard (the all-gather has nothing left to do). The blocking
 * functions are start + wait + done: the same bits. work (and shard) must
 * stay untouched until the handles complete. */
void mt_zero_reduce_scatter_segment_start(mt_group *g, const mt_zero_layout *L, int s,
                                          float *work, mt_request **req);
void mt_zero_reduce_scatter_segment_done(mt_backend *be, const mt_zero_layout *L, int s,
                                         const float *work, float *grad_shard);
void mt_zero_allgather_segment_start(mt_group *g, const mt_zero_layout *L, int s,
                                     const void *shard, void *work, mt_dtype t, mt_request **req);

/* ---- the full flat buffer (ZeRO-1/2 keep full parameters) ---- */

/* Reduce-scatter every bucket of the full fp32 gradient buffer `flat`
 * [flat_numel] in place: afterwards this rank's owned elements of flat hold
 * the sums over g (the rest holds partial sums and must not be used).
 * Padded buckets go through `scratch` [max_bucket_padded] fp32 (may be NULL
 * when padding == 0). */
void mt_zero_reduce_scatter_flat(mt_group *g, mt_backend *be, const mt_zero_layout *L,
                                 float *flat, float *scratch);

/* All-gather every bucket of the full parameter buffer `flat` [flat_numel]
 * (dtype t) in place: each rank contributes its owned elements and receives
 * everyone else's. Padded buckets go through `scratch`
 * [max_bucket_padded * sizeof(t)] bytes (may be NULL when padding == 0). */
void mt_zero_allgather_flat(mt_group *g, mt_backend *be, const mt_zero_layout *L, void *flat,
                            void *scratch, mt_dtype t);

/* The two above one bucket at a time (overlap_grad_reduce /
 * overlap_param_gather): _start begins bucket b's collective (padded
 * buckets are staged in `scratch`, [padded length] elements of that
 * bucket's own, which must stay untouched until _done) and returns its
 * handle; after mt_wait on it, _done copies a padded bucket's result back
 * into flat. The blocking functions are start + wait + done per bucket, in
 * bucket order: the same bits whenever a bucket runs. */
mt_request *mt_zero_reduce_scatter_flat_start(mt_group *g, mt_backend *be, const mt_zero_layout *L,
                                              int b, float *flat, float *scratch);
void mt_zero_reduce_scatter_flat_done(mt_backend *be, const mt_zero_layout *L, int b, float *flat,
                                      const float *scratch);
mt_request *mt_zero_allgather_flat_start(mt_group *g, mt_backend *be, const mt_zero_layout *L,
                                        int b, void *flat, void *scratch, mt_dtype t);
void mt_zero_allgather_flat_done(mt_backend *be, const mt_zero_layout *L, int b, void *flat,
                                 const void *scratch, mt_dtype t);

/* Copy this rank's owned elements of the flat buffer `flat` (dtype t) into
 * its shard buffer `shard` (padding positions set to zero). */
void mt_zero_flat_to_shard(mt_backend *be, const mt_zero_layout *L, const void *flat, void *shard,
                           mt_dtype t);

#endif
