/* checkpoint/legacy_zero.h — the ZeRO shard files
 * (mp_rank_TT[_PPP]/distrib_optim_dpRRR.bin) of the previous checkpoint
 * format (checkpoint/legacy_format.h): loading, and the layout helpers a
 * writer shares with it. */
#ifndef MT_CHECKPOINT_LEGACY_ZERO_H
#define MT_CHECKPOINT_LEGACY_ZERO_H

#include <stddef.h>

#include "checkpoint/legacy_format.h"
#include "optimizer/distrib_optimizer.h"

/* Checkpoint shard files of the previous per-layout format
 * plugged into mt_ckpt_layout.shard_load with ctx = the mt_zero_opt (a
 * writer for tests: tests/support/legacy_writer.h). Load
 * refuses another zero_stage, dp size, bucket size, dtype or model with a
 * message. After a successful load on every rank, call mt_zero_opt_sync_params. */
int mt_zero_ckpt_load(void *ctx, mt_ckpt_state *st, const char *mp_dir, char *err,
                      size_t errlen);


/* The expert layout record of part X of z (etp, ep, edp and this rank's
 * coordinates, the expert shard size). */
mt_legacy_zexp mt_legacy_zero_exp(const mt_zero_opt *z, const mt_zero_part *X);
/* Bytes of part P's shards in a shard file: parameters (dtype T), exp_avg,
 * exp_avg_sq and, with a master copy, the fp32 master. */
size_t mt_legacy_zero_part_bytes(const mt_zero_opt *z, const mt_zero_part *P);
/* mp_dir/distrib_optim_dpRRR.bin of data-parallel rank dp_rank. */
void mt_legacy_zero_shard_path(char *out, size_t n, const char *mp_dir, int dp_rank);

#endif
