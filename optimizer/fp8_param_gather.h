/* optimizer/fp8_param_gather.h — fp8_param_gather for ZeRO stages 1 and 2
 * (Megatron's --fp8-param-gather with the distributed optimizer; TE's
 * cast_master_weights_to_fp8 for current scaling; docs/fp8.md "FP8
 * parameter gather"). After the optimizer step each rank holds the updated
 * bf16 values of its owned shard of the dense part (mt_zero_part 0): for
 * every FP8 linear weight (mt_gpt_fp8_gathered_weight) it takes the amax of
 * its owned pieces, all-reduces the amaxes (max) over the data-parallel
 * group (dp x cp) and then the tensor-parallel group, computes the weight's
 * tensorwise scale from the reduced amax (the whole tp shard's, as the FP8
 * linear does for a bf16 weight), and quantizes its pieces to e4m3 codes;
 * then, bucket by bucket, ONE variable all-gather of bytes (mt_allgatherv,
 * MT_U8) carries every rank's real owned elements: bf16 (2 bytes) for the
 * rest, the codes (1 byte) for FP8 weight elements. The codes land in a
 * uint8 buffer beside the bf16 parameter buffer (MT_MEM_PARAM) that the FP8
 * linear decodes (mt_fp8_linear_set_weight_codes) instead of quantizing the
 * bf16 weight; the bf16 copies of FP8 weights outside the owned shard are
 * not refreshed (mt_fp8pg_refresh_bf16 does it where a full copy is read).
 * Blockwise: the same per 128x128 block of each weight's tp shard (block
 * amaxes over dp x cp only, power-of-2 scales; TE's blockwise cast).
 * Tensorwise and blockwise recipes (config rule r_fp8_param_gather).
 * Errors: fatal on a caller bug. */
#ifndef MT_OPTIMIZER_FP8_PARAM_GATHER_H
#define MT_OPTIMIZER_FP8_PARAM_GATHER_H

#include <stdint.h>
#include <stdio.h>

#include "optimizer/distrib_optimizer.h"

/* What one gather moves (bytes of the gathered buffers, all ranks' parts). */
typedef struct {
  int64_t fp8_bytes, bf16_bytes; /* by kind: e4m3 codes, bf16 elements */
  int64_t amax_bytes;            /* the amaxes all-reduced (dp, then tp) */
  int64_t ops;                   /* all-gathers (one per bucket) */
  int64_t measured;              /* the dp group's all-gather counter over the gather */
} mt_fp8pg_stats;

typedef struct mt_fp8pg mt_fp8pg;

/* Set up over z's dense part (stage 1 or 2), install the codes on the
 * model's FP8 linear, and gather once (collective over z's dp group and tp:
 * every rank starts from the same weights). tp may be NULL. */
mt_fp8pg *mt_fp8pg_create(mt_zero_opt *z, mt_group *tp);
void mt_fp8pg_destroy(mt_fp8pg *g);

/* The gather above (collective over dp x cp and tp); the last one's figures
 * into g's stats. */
void mt_fp8pg_gather(mt_fp8pg *g);
/* The bf16 all-gather of the whole dense part (every parameter's full bf16
 * copy, for readers of the full buffer; collective over dp x cp). */
void mt_fp8pg_refresh_bf16(mt_fp8pg *g);

/* "> fp8_param_gather: ..." lines: measured against core/fp8_gather.h. */
void mt_fp8pg_print(const mt_fp8pg *g, FILE *f);

#endif
