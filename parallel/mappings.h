/* parallel/mappings.h — the tensor- and sequence-parallel regions of
 * Megatron-LM (tensor_parallel/mappings.py; Shoeybi et al. 2019 §3 "f" and
 * "g"; Korthikanti et al. 2022 §4.2.2 "g" and "ḡ"), as explicit forward and
 * backward functions over the TP group.
 *
 * Tensors are [s, b, h] with the sequence outermost, so a sequence-parallel
 * shard [s/tp, b, h] of rank r is the contiguous block r of the full tensor
 * and every SP collective works on whole buffers. All functions take the
 * element count of the SHARD (`shard_n` = s/tp · b · h) or of the full
 * tensor (`n`), dtype `t`, and communicate over `tp`. With tp NULL or of
 * size 1 they do nothing; callers then pass the same buffer as input and
 * output (device memory is never copied here). Buffers are device memory of
 * the group's engine (host for MPI, GPU for NCCL).
 *
 *   region                         forward          backward
 *   copy_to_tp (f)                 identity         all-reduce
 *   reduce_from_tp (g)             all-reduce       identity
 *   scatter_to_sp                  keep own chunk   all-gather
 *   gather_from_sp (SP "g")        all-gather       reduce-scatter
 *   reduce_scatter_to_sp (SP "ḡ")  reduce-scatter   all-gather
 */
#ifndef MT_PARALLEL_MAPPINGS_H
#define MT_PARALLEL_MAPPINGS_H

#include <stdint.h>

#include "parallel/comm.h"

/* f backward / g forward: in-place sum of x[n] over tp. */
void mt_tp_all_reduce(mt_group *tp, void *x, int64_t n, mt_dtype t);
#define mt_copy_to_tp_region_bwd mt_tp_all_reduce
#define mt_reduce_from_tp_region_fwd mt_tp_all_reduce

/* gather_from_sp forward (= scatter_to_sp and reduce_scatter_to_sp backward):
 * full[tp * shard_n] = concat over TP ranks of shard[shard_n]. */
void mt_sp_all_gather(mt_group *tp, const void *shard, void *full, int64_t shard_n, mt_dtype t);
#define mt_gather_from_sp_region_fwd mt_sp_all_gather
#define mt_reduce_scatter_to_sp_region_bwd mt_sp_all_gather
#define mt_scatter_to_sp_region_bwd mt_sp_all_gather

/* reduce_scatter_to_sp forward (= gather_from_sp backward):
 * shard[shard_n] = (sum over TP ranks of full[tp * shard_n]) chunk tp_rank. */
void mt_sp_reduce_scatter(mt_group *tp, const void *full, void *shard, int64_t shard_n, mt_dtype t);
#define mt_reduce_scatter_to_sp_region_fwd mt_sp_reduce_scatter
#define mt_gather_from_sp_region_bwd mt_sp_reduce_scatter

#endif
