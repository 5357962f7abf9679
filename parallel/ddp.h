/* parallel/ddp.h — data-parallel gradient reduction with buckets (Li et al.
 * 2020, "PyTorch Distributed: Experiences on Accelerating Data Parallel
 * Training", §3.2 gradient bucketing; Megatron-core
 * distributed/param_and_grad_buffer.py): the ZeRO-stage-0 counterpart of
 * parallel/zero.h. Knows nothing of the Transformer: it sums a flat fp32
 * gradient buffer over the group that owns each range of it, one
 * bucket-sized all-reduce at a time.
 *
 * Layout:
 *  - The caller cuts the flat buffer into RANGES [start, end), each reduced
 *    over one group (the trainer: runs of dense parameters over the
 *    data-parallel group, runs of expert parameters over the
 *    expert-data-parallel group — the ranks holding the same experts).
 *  - Each range is cut into BUCKETS of `bucket_size` elements from its start
 *    (the last one shorter); bucket_size <= 0 means one bucket per range.
 *    Empty ranges and ranges whose group has a single rank get no bucket.
 *  - mt_ddp_allreduce issues one all-reduce (MT_F32, MT_OP_SUM, in place) per
 *    bucket, in range order and then offset order: the order, the bucket
 *    boundaries and so the bits are fixed by the layout alone.
 *
 * Communication volume per call (nccl-tests' bus bytes, parallel/comm.h): a
 * range of N elements over a group of n ranks moves 4N bytes of algorithm
 * data and 4N · 2(n−1)/n bus bytes per rank (ring all-reduce), whatever the
 * bucket size; buckets trade one latency per bucket for the chance to overlap
 * (a blocking engine does not overlap: the sum is the same, bit for bit).
 * Buffers are device pointers of the group's engine (host memory on MPI).
 */
#ifndef MT_PARALLEL_DDP_H
#define MT_PARALLEL_DDP_H

#include <stdint.h>

#include "parallel/comm.h"

/* A range [start, end) of the flat gradient buffer, summed over `group`. */
typedef struct {
  int64_t start, end;
  mt_group *group;
} mt_ddp_range;

/* One all-reduce: flat elements [offset, offset + len) over group. */
typedef struct {
  int64_t offset, len;
  mt_group *group;
} mt_ddp_bucket;

typedef struct {
  int64_t bucket_size;   /* elements per bucket as given (<= 0: whole ranges) */
  mt_ddp_bucket *bkt;    /* in reduction order */
  int n_bkt;
} mt_ddp_buffer;

/* Build the buckets of n_ranges disjoint ranges, in the given order (an
 * empty range is skipped), with bucket_size elements per bucket (<= 0: one
 * bucket per range).
 * Ranges over a group of one rank, or a NULL group, get no bucket. Host
 * memory, no communication. Free with mt_ddp_buffer_free. */
void mt_ddp_buffer_build(mt_ddp_buffer *B, const mt_ddp_range *ranges, int n_ranges,
                         int64_t bucket_size);
void mt_ddp_buffer_free(mt_ddp_buffer *B);

/* Sum the fp32 gradient buffer grad [flat numel] over each bucket's group, in
 * place (all-reduce, MT_OP_SUM), bucket by bucket in layout order. Collective
 * over every group of the layout: all ranks of a group must call it with the
 * same layout of their ranges. Errors end the job (parallel/comm.h). */
void mt_ddp_allreduce(const mt_ddp_buffer *B, float *grad);

#endif
