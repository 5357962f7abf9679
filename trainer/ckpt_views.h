/* trainer/ckpt_views.h — this rank's model and optimizer state as views of
 * global tensors (trainer/dist_checkpoint.h): what a layout-free checkpoint
 * saves and what loading fills, for any tp / pp / ep / etp / dp / cp /
 * zero_stage. The rules (docs/checkpoint.md "Who writes what"):
 *  - a parameter's view is its tensor-parallel box (mt_param rows/cols,
 *    row_offset/col_offset, local_rows/local_cols), two views for a SwiGLU
 *    fc1 shard (mt_param.halves), the word embedding / output layer cut to
 *    the real vocabulary rows;
 *  - replicas are written once: tp_replicated tensors by tp rank 0 (expert
 *    tensors: etp rank 0), the tied embedding's last-stage copy
 *    (shared_copy) never, and of the data-parallel replicas only the rank
 *    the caller names (write_dense / write_expert) — or, under ZeRO, every
 *    rank writes the flat sub-ranges it owns (mt_zero_chunk), so the writing
 *    is spread over the data-parallel group;
 *  - optimizer state ("optimizer.state.exp_avg.<param>", exp_avg_sq,
 *    fp32_param when T != fp32) has the same boxes as its parameter; under
 *    ZeRO only the owned sub-ranges exist.
 */
#ifndef MT_TRAINER_CKPT_VIEWS_H
#define MT_TRAINER_CKPT_VIEWS_H

#include "model/gpt.h"
#include "trainer/dist_checkpoint.h"

/* Views of the parameters of model m held in its full flat parameter buffer
 * (mt_gpt_param_buffer; not for ZeRO-3, whose parameters live in shards),
 * appended to (*v)[*n ...] (grown with realloc). write_dense / write_expert:
 * this rank is the data-parallel (dp x cp) / expert-data-parallel writer of
 * its dense / expert tensors; tp_rank and etp_rank rules are applied inside.
 * vocab_size cuts the vocabulary padding. Pass 0, 0 for loading. */
void mt_ckpt_model_param_views(mt_gpt *m, int64_t vocab_size, int write_dense, int write_expert,
                               mt_dckpt_view **v, int *n);

#endif
