/* checkpoint/fp8_meta.h — the FP8 delayed-scaling state in the layout-free
 * checkpoint (docs/fp8.md "Checkpoints"; TE keeps it in each module's
 * `_extra_state`): one fp32 tensor [1, 1 + fp8_amax_history_len] per FP8
 * linear layer and role, "<linear>.fp8_meta.<role>" = [scale, amax history
 * most recent first] (model/gpt.h mt_gpt_fp8_meta). The amaxes are reduced
 * over tp and cp (and dp unless tp_only_amax_red), so the state is one
 * global value per tensor: saved once (tp rank 0, data-parallel rank 0 of
 * each stage), loaded by every rank under any layout. A routed expert's
 * ("decoder.layers.L.mlp.experts.E.linear_fc1.fp8_meta.input", global
 * expert E, as its weight's name) is reduced over its ETP group and its
 * expert-data-parallel group: saved by the ETP and expert-data-parallel
 * rank 0 holding expert E, loaded under any ep / etp. */
#ifndef MT_CHECKPOINT_FP8_META_H
#define MT_CHECKPOINT_FP8_META_H

#include <stddef.h>

#include "checkpoint/dist_checkpoint.h"
#include "checkpoint/state.h"
#include "model/gpt.h"

/* This rank's delayed-scaling states as checkpoint buffers (host fp32, in
 * place): the routed experts' (experts 1) or all others (experts 0); *out
 * allocated (free it), NULL when none. Returns the count. */
int mt_ckpt_fp8_buffers(mt_gpt *m, int experts, mt_ckpt_buffer **out);

/* Before loading c into views v[0..n): a state view whose tensor c lacks (a
 * checkpoint saved without the delayed recipe, e.g. in bf16, or before the
 * state was saved) is dropped, so that state starts empty as TE initialises
 * it (scale 1, zero history), counted in *fresh; a stored state of another
 * length is an error naming both history lengths. Returns the number of
 * views kept, or -1 with the message. */
int mt_ckpt_fp8_resolve(const mt_dckpt *c, mt_dckpt_view *v, int n, int *fresh, char *err,
                        size_t errlen);

/* 1 for a checkpoint tensor name of this kind: a stored state that a run
 * without the delayed recipe (or with some layers in bf16) does not load
 * is ignored, as TE's bf16 modules keep whatever `_extra_state` holds. */
int mt_ckpt_fp8_is_meta(const char *name);

#endif
