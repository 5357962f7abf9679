/* core/fp8_gather.h — the bytes of ZeRO's parameter all-gather with and
 * without fp8_param_gather (docs/fp8.md "FP8 parameter gather"), for the
 * optimizer's report and the planner. Per data-parallel group and step
 * (stages 1/2: one gather after the optimizer step), counted as the
 * gathered buffers (every rank's part, what the all-gather counter's
 * `bytes` adds up; a rank receives these minus its own part):
 *   S  sharded elements of the dense part (its segments, alignment gaps
 *      between parameters included),
 *   F  elements of the FP8 linears' weights among them,
 *   P  ZeRO's bucket padding (each segment's last bucket rounded up to a
 *      multiple of dp; parallel/zero.h),
 *   ns the number of their scales (tensorwise: one per weight; blockwise:
 *      one per 128x128 block of each weight's tp shard).
 *   FP8 gather: 2·(S − F) + F bytes (bf16 for the rest, one e4m3 code per
 *     FP8 weight element; ranks send only their real elements: no padding);
 *   bf16 gather: 2·(S + P) bytes (whole padded buckets);
 *   scales: 4·ns bytes all-reduced (max of the shard amaxes) over dp, and
 *     for tensorwise again over tp when tp > 1; every rank then computes
 *     the same scales, so no scale travels in the gather itself (TE's
 *     cast_master_weights_to_fp8). */
#ifndef MT_CORE_FP8_GATHER_H
#define MT_CORE_FP8_GATHER_H

#include <stdint.h>

static inline int64_t mt_fp8_gather_bytes(int64_t S, int64_t F) { return 2 * (S - F) + F; }
static inline int64_t mt_bf16_gather_bytes(int64_t S, int64_t P) { return 2 * (S + P); }
static inline int64_t mt_fp8_gather_amax_bytes(int64_t ns) { return 4 * ns; }

#endif
