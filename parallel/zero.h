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

/* Copy this rank's owned elements of the flat buffer `flat` (dtype t) into
 * its shard buffer `shard` (padding positions set to zero). */
void mt_zero_flat_to_shard(mt_backend *be, const mt_zero_layout *L, const void *flat, void *shard,
                           mt_dtype t);

/* ---- ZeRO-2/3 residency policy (which working buffers live when) ----
 *
 * One micro-batch is the sequence of 2S steps over the S segments (segment
 * 0 = embedding, 1..S-2 = layers, S-1 = head; pipeline stages do not use
 * stages 2/3):
 *   F(0) F(1) ... F(S-1) B(S-1) ... B(1) B(0)
 * step x < S is F(x), step 2S-1-x is B(x). Step i needs the parameters of
 * its segment, the head also those of segment 0 when the output layer is
 * tied to the word embedding, and B(0) none (the embedding backward only
 * scatters gradients). B(x) writes the gradients of segment x (B(S-1) also
 * of segment 0 when tied); a segment's gradients are complete after the
 * last step that writes them, B(x).
 *
 * Stage 3, before step i: free gathered segments that steps i .. i+prefetch
 * do not need and no begun-but-unended step uses, then gather the missing
 * ones in step order (the next `prefetch` steps' segments are gathered
 * before step i computes: "prefetch" means gathered early; a blocking engine
 * does not overlap). After step i: free what steps i+1 .. i+max(1,prefetch)
 * do not need (so the head, used by F(S-1) and B(S-1) back to back, is
 * gathered once for both). Stages 2/3, before a backward step: allocate
 * zeroed gradient working buffers for the segments it writes; after it:
 * reduce-scatter the segments whose gradients are now complete and free
 * them. Steps may nest (full recomputation begins the backward steps of a
 * chunk of layers before any of them ends): a segment stays while a step
 * that needs it is open.
 *
 * The policy is pure bookkeeping (no allocation after init, no
 * communication, no backend): the trainer's hooks (trainer/zero_hooks.c)
 * carry the actions out and the planner (planner/plan_stage.c) counts their
 * bytes, so both follow the same decisions. */
typedef enum {
  MT_ZERO_FREE_PARAMS = 0, /* release segment's gathered parameters */
  MT_ZERO_GATHER_PARAMS,   /* all-gather segment's parameters (mt_zero_allgather_segment) */
  MT_ZERO_ALLOC_GRADS,     /* allocate segment's zeroed gradient working buffer */
  MT_ZERO_REDUCE_GRADS     /* reduce-scatter (mt_zero_reduce_scatter_segment), then free */
} mt_zero_action_kind;

typedef struct {
  mt_zero_action_kind kind;
  int seg;
} mt_zero_action;

typedef struct {
  int n_seg, stage, prefetch, tied;
  unsigned char *param; /* [n_seg] parameters gathered (stage 3) */
  unsigned char *grad;  /* [n_seg] gradient working buffer allocated */
  unsigned char *want;  /* [n_seg] scratch */
  int *nopen;           /* [n_seg] steps begun but not ended that need its parameters */
  mt_zero_action *act;  /* the last decision: act[0 .. n_act) in order */
  int n_act;
} mt_zero_residency;

/* Start with nothing resident: n_seg segments (S above), stage 2 or 3,
 * prefetch steps gathered ahead (stage 3), tied 1 when the head also needs
 * segment 0. Fatal on other stages. Free with mt_zero_residency_free. */
void mt_zero_residency_init(mt_zero_residency *R, int n_seg, int stage, int prefetch, int tied);
void mt_zero_residency_free(mt_zero_residency *R);

/* The decision at the start (after == 0) or the end (after == 1) of step i
 * (0 <= i < 2 n_seg): fills R->act[0 .. n_act) with the actions to carry out
 * in that order, updates the resident/open state as if they were done, and
 * returns n_act. */
int mt_zero_residency_step(mt_zero_residency *R, int i, int after);

/* Release every gathered parameter segment (end of a forward-only pass or
 * of the run): R->act receives one MT_ZERO_FREE_PARAMS per gathered segment
 * in segment order, open-step counts are reset; returns n_act. Gradient
 * working buffers are not touched. */
int mt_zero_residency_release_all(mt_zero_residency *R);

#endif
