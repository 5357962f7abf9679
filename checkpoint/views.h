/* checkpoint/views.h — this rank's model and optimizer state as views of
 * global tensors (checkpoint/dist_checkpoint.h): what a layout-free checkpoint
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
#ifndef MT_CHECKPOINT_VIEWS_H
#define MT_CHECKPOINT_VIEWS_H

#include "model/gpt.h"
#include "checkpoint/state.h"
#include "checkpoint/dist_checkpoint.h"
#include "optimizer/optimizer.h"
#include "optimizer/distrib_optimizer.h"

/* Views of the parameters of model m held in its full flat parameter buffer
 * (mt_gpt_param_buffer; not for ZeRO-3, whose parameters live in shards),
 * appended to (*v)[*n ...] (grown with realloc). write_dense / write_expert:
 * this rank is the data-parallel (dp x cp) / expert-data-parallel writer of
 * its dense / expert tensors; tp_rank and etp_rank rules are applied inside.
 * vocab_size cuts the vocabulary padding. Pass 0, 0 for loading. */
void mt_ckpt_model_param_views(mt_gpt *m, int64_t vocab_size, int write_dense, int write_expert,
                               mt_dckpt_view **v, int *n);

/* Whether this rank stores parameter p (and its optimizer state): never a
 * shared_copy; a tp_replicated tensor only on tp rank 0 (expert tensors:
 * etp rank 0); and only when dp_writer (this rank is the data-parallel
 * writer of p's kind, or under ZeRO the owner of the elements). */
int mt_ckpt_param_writes(const mt_param *p, int dp_writer, int tp_rank, int etp_rank);

/* Views of elements [lo, hi) (flat order of p's local box, 0 <= lo <= hi <=
 * p->numel) of parameter p, held at `data` (element lo, dtype dt), stored as
 * the global tensor prefix + p->name: one view, or one per SwiGLU half
 * (p->halves: weights split along rows, [1, n] biases along columns), the
 * word embedding / output layer cut to vocab_size rows; empty views are
 * dropped. Appended to (*v)[*n ...] (grown with realloc). */
void mt_ckpt_param_range_views(const mt_param *p, const char *prefix, int64_t vocab_size,
                               mt_dtype dt, int64_t lo, int64_t hi, void *data, int write,
                               mt_dckpt_view **v, int *n);

/* Optimizer state of zero_stage 0 (optimizer/optimizer.h: m, v, and the fp32
 * master when it is a separate buffer) as views of
 * "optimizer.state.exp_avg.<param>", "optimizer.state.exp_avg_sq.<param>",
 * "optimizer.state.fp32_param.<param>" (fp32, the parameter's boxes of
 * model m; write rules as mt_ckpt_model_param_views). */
void mt_ckpt_adamw_views(mt_gpt *m, const mt_adamw *opt, int64_t vocab_size, int write_dense,
                         int write_expert, mt_dckpt_view **v, int *n);

/* ZeRO (stages 1-3): the chunks this rank owns (mt_zero_part.chunk, dense and
 * expert parts) as flat sub-ranges of their parameters' boxes: the
 * parameters (params != 0; stage 1/2 from the model's full flat buffer,
 * stage 3 from part.param_shard, dtype T) and the optimizer state (optim !=
 * 0; part.m, part.v, part.master at the chunk's shard_off, fp32). write: this
 * rank saves (the tp / etp rule of mt_ckpt_param_writes is applied inside;
 * the owner is the data-parallel writer of its chunks). */
void mt_ckpt_zero_views(mt_zero_opt *z, int64_t vocab_size, int params, int optim, int write,
                        mt_dckpt_view **v, int *n);

/* Persistent buffers (host memory, fp32 / int64, [1, numel]) as whole views
 * with `write` and view.host set. */
void mt_ckpt_buffer_views(const mt_ckpt_buffer *b, int nb, int write, mt_dckpt_view **v,
                          int *n);

#endif
