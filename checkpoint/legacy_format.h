/* checkpoint/legacy_format.h — megatrain's PREVIOUS, per-layout checkpoint format.
 * The trainer saves the layout-free format (checkpoint/dist_checkpoint.h) and
 * loads this one only for checkpoints written before it, under the layout
 * that wrote them (trainer/train_checkpoint.c). This header is the format:
 * its files, records and the rank layout; the readers are
 * checkpoint/legacy_reader.h (model_optim_rng.bin), checkpoint/legacy_zero.h
 * (ZeRO shard files) and checkpoint/legacy_records.h (CRC-framed files,
 * buffer records); a writer, kept to make such checkpoints in tests, is
 * tests/support/legacy_writer.h.
 *
 * Layout (Megatron's names): SAVE/iter_0000100/ holds one
 * mp_rank_TT[_PPP]/model_optim_rng.bin per model-parallel rank (written by
 * data-parallel rank 0; ZeRO shards add per-dp files) and metadata.json;
 * SAVE/latest_checkpointed_iteration.txt names the newest complete one.
 *
 * Crash safety: everything is written into SAVE/iter_0000100.tmp, fsynced,
 * and renamed to its final name only when every rank has finished; the
 * "latest" file is replaced by rename afterwards. A crash at any point leaves
 * the previous checkpoint loadable. Every .bin ends with a CRC-32 (zlib) of
 * its contents that load verifies; metadata.json repeats it.
 *
 * What is saved: parameters, Adam moments (and fp32 master copies), the
 * optimizer step, iteration, consumed samples, skipped/nan counters, the seed
 * and the resolved config. The RNG is counter-based (docs/rng.md), so seed and
 * iteration/sample ids are its whole state; the data loader's position is
 * consumed_samples; the LR schedule is a function of the iteration.
 */
#ifndef MT_CHECKPOINT_LEGACY_FORMAT_H
#define MT_CHECKPOINT_LEGACY_FORMAT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "checkpoint/state.h"
#include "model/params.h"
#include "parallel/comm.h"

/* Where this rank's checkpoint file lives and who writes it. */
typedef struct {
  int tp_rank, pp_rank, pp_size;
  int writer;        /* 1 on the rank that writes this model-parallel file (dp rank 0) */
  mt_group *world;   /* barrier + agreement over all ranks */
  /* ZeRO (parallel.zero_stage >= 1, checkpoint/legacy_zero.c): when set,
   * EVERY rank writes / reads its own shard file inside the mp_rank
   * directory (path given as mp_dir) through these instead of
   * model_optim_rng.bin, and `opt` is unused (may be NULL). They return 0 or
   * -1 with a message; shard_load must modify nothing on error. */
  int (*shard_save)(void *ctx, const mt_ckpt_state *st, const char *mp_dir, char *err,
                    size_t errlen);
  int (*shard_load)(void *ctx, mt_ckpt_state *st, const char *mp_dir, char *err, size_t errlen);
  void *shard_ctx;
  /* buffers of this model-parallel rank (its pipeline stage's layers): the
   * writer stores them as records of kind "buffer" after the parameters of
   * model_optim_rng.bin, or with ZeRO in mp_rank_TT[_PPP]/model_buffers.bin
   * (magic "MTBUFS\0\1", u32 count, the same records, CRC-32). Loading
   * requires exactly these names, dtypes and sizes. */
  const mt_ckpt_buffer *buffers;
  int n_buffers;
} mt_ckpt_layout;

/* model_optim_rng.bin: MT_LEGACY_CKPT_MAGIC, u32 version, u32 record
 * count, i64 iteration, consumed_samples, step, skipped_iters, nan_iters,
 * u64 seed, then records (u32 name_len, name, u32 kind, u32 dtype, i64
 * shape[6] = {rows, cols, local_rows, local_cols, row_offset, col_offset},
 * u64 nbytes, data): every parameter for each kind param, exp_avg,
 * exp_avg_sq, [master], then the buffer records; then a CRC-32 of
 * everything before it. */
#define MT_LEGACY_CKPT_MAGIC "MTCKPT\0\1"
#define MT_LEGACY_CKPT_VERSION 1u
enum {
  MT_CKPT_REC_PARAM = 0,
  MT_CKPT_REC_EXP_AVG = 1,
  MT_CKPT_REC_EXP_AVG_SQ = 2,
  MT_CKPT_REC_MASTER = 3,
  MT_CKPT_REC_BUFFER = 4 /* non-parameter state (checkpoint/legacy_records.h) */
};
/* model_buffers.bin (ZeRO): magic, u32 count, buffer records, CRC-32. */
#define MT_LEGACY_BUFS_MAGIC "MTBUFS\0\1"

/* The mp_rank directory of layout L: mp_rank_TT, or mp_rank_TT_PPP with
 * pipeline parallelism (Megatron's names). */
static inline void mt_ckpt_mp_dir_name(char *out, size_t n, const mt_ckpt_layout *L) {
  if (L->pp_size > 1) snprintf(out, n, "mp_rank_%02d_%03d", L->tp_rank, L->pp_rank);
  else snprintf(out, n, "mp_rank_%02d", L->tp_rank);
}

/* ZeRO shard files (read by checkpoint/legacy_zero.c through
 * mt_ckpt_layout.shard_load).
 *
 * Every data-parallel rank r writes mp_rank_TT[_PPP]/distrib_optim_dp{r:03d}.bin
 * (Megatron's distrib_optim.pt, one file per rank instead of a gathered one):
 *   "MTZERO\0\1", u32 version, u32 zero_stage, u32 dp, u32 dp_rank,
 *   u32 dtype (T), u32 has_master, i64 flat_numel, i64 shard_numel,
 *   i64 bucket_size, i64 iteration, consumed_samples, step, skipped_iters,
 *   nan_iters, u64 seed, then the shard buffers: parameters (T), exp_avg,
 *   exp_avg_sq, [master] (fp32), each shard_numel elements, then a CRC-32.
 * With expert parameters (MoE: a second part sharded over the expert-data-
 * parallel group) the version is 3, the header is followed by the expert
 * layout: u32 edp, edp_rank, etp, etp_rank, ep, ep_rank, i64 expert
 * shard_numel, and the dense shards by the expert part's parameter, exp_avg,
 * exp_avg_sq, [master] shards. (Version 2, still read, had only u32 edp,
 * edp_rank, i64 shard_numel; it was written with etp 1 only.) etp and ep are
 * recorded because edp and the shard size alone do not fix them: etp 2 x ep 1
 * and etp 1 x ep 2 give expert shards of one size. Every rank writes its own
 * file (its dense and expert shards), so any tp/ep/etp/dp layout saves. The
 * union of the parameter shards is the full parameter buffer (every stage),
 * so the file set is the whole training state. Loading requires the same
 * zero_stage, dp, expert layout (etp, ep, edp and this rank's coordinates),
 * bucket size and model (no cross-layout resharding).
 */
#define MT_LEGACY_ZMAGIC "MTZERO\0\1"
#define MT_LEGACY_ZVERSION 1u  /* dense parameters only */
#define MT_LEGACY_ZVERSION_MOE2 2u /* + expert part (edp only; read, no longer written) */
#define MT_LEGACY_ZVERSION_MOE 3u /* + expert part with its etp / ep layout */

typedef struct {
  char magic[8];
  uint32_t version, stage, dp, dp_rank, dtype, has_master;
  int64_t flat_numel, shard_numel, bucket_size;
  int64_t iteration, consumed_samples, step, skipped_iters, nan_iters;
  uint64_t seed;
} mt_legacy_zhdr;

typedef struct {
  uint32_t edp, edp_rank, etp, etp_rank, ep, ep_rank;
  int64_t shard_numel;
} mt_legacy_zexp;

typedef struct { /* version 2 */
  uint32_t edp, edp_rank;
  int64_t shard_numel;
} mt_legacy_zexp2;

#endif
