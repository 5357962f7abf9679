/* trainer/replica_check.c — the cross-rank checks that replicated
 * parameters are bitwise identical: data x context-parallel replicas
 * (every CP rank holds the whole model), expert-data-
 * parallel replicas, the two copies of a tied word embedding and the
 * tensor-parallel-replicated tensors (see train_internal.h). */
#include <stdio.h>
#include <stdlib.h>

#include "core/hash.h"
#include "core/util.h"
#include "trainer/train_internal.h"

/* fp32 master weights of parameter i when the (unsharded) optimizer keeps
 * them apart from lower-precision parameters (bf16, zero_stage 0), else NULL:
 * replicas must agree on them as on the parameters. ZeRO shards them. */
static const float *master_of(const mt_trainer *t, int i) {
  if (t->zero || !t->opt.master || (void *)t->opt.master == t->opt.param_buf) return NULL;
  return t->opt.master + mt_gpt_params(t->model)->p[i].offset;
}

/* FNV-1a of h and the `bytes` bytes at backend pointer dev (via *host, *cap). */
static uint64_t hash_dev(mt_trainer *t, uint64_t h, const void *dev, size_t bytes,
                         unsigned char **host, size_t *cap) {
  if (bytes > *cap) *host = mt_xrealloc(*host, *cap = bytes);
  t->be->ops->memcpy_d2h(t->be, *host, dev, bytes);
  return mt_fnv1a64(h, *host, bytes);
}

/* FNV-1a over the bytes of the parameters selected by `only_replicated`
 * (tp-replicated dense ones), or all dense ones (0), or the experts (2),
 * and over their fp32 master weights where kept apart (master_of). */
static uint64_t param_hash(mt_trainer *t, int only_replicated) {
  const mt_param_list *pl = mt_gpt_params(t->model);
  size_t es = mt_dtype_size(t->be->dtype);
  uint64_t h = MT_FNV1A64_INIT;
  unsigned char *host = NULL, *full = NULL;
  size_t cap = 0;
  /* sharded parameters (ZeRO-3), or FP8 weights gathered as codes
   * (fp8_param_gather: their bf16 copies are fresh only in the owned
   * shard): all-gather over dp */
  if (t->zero && (t->zero->o.stage == 3 || t->zero->dense_refresh)) {
    full = mt_xmalloc((size_t)pl->numel * es);
    mt_trainer_zero_full_params_host(t, full);
  }
  for (int i = 0; i < pl->n; i++) {
    if (only_replicated == 1 && !pl->p[i].tp_replicated) continue;
    if ((only_replicated == 2) != (pl->p[i].is_expert != 0)) continue;
    size_t bytes = (size_t)pl->p[i].numel * es;
    const unsigned char *src = full ? full + (size_t)pl->p[i].offset * es : NULL;
    if (!src) {
      if (bytes > cap) host = mt_xrealloc(host, cap = bytes);
      t->be->ops->memcpy_d2h(t->be, host, mt_gpt_param_ptr(t->model, i), bytes);
      src = host;
    }
    h = mt_fnv1a64(h, src, bytes);
    const float *mw = master_of(t, i);
    if (mw) h = hash_dev(t, h, mw, (size_t)pl->p[i].numel * sizeof(float), &host, &cap);
  }
  free(host);
  free(full);
  return h;
}

/* 1 when the 64-bit value is equal on all ranks of g (all-reduce of max and -min). */
static int agree_u64(mt_group *g, uint64_t h) {
  int64_t v[2] = {(int64_t)(h >> 1), -(int64_t)(h >> 1)};
  mt_allreduce(g, &v[0], 1, MT_I64, MT_OP_MAX);
  mt_allreduce(g, &v[1], 1, MT_I64, MT_OP_MAX);
  return v[0] == -v[1];
}

int mt_trainer_check_replicas(mt_trainer *t, char *err, size_t errlen) {
  mt_trainer_params_wait(t); /* overlap_param_gather: the step's parameters */
  if (mt_group_size(t->dp_group) > 1 && !agree_u64(t->dp_group, param_hash(t, 0))) {
    snprintf(err, errlen, "parameters differ across the data-parallel%s group (hashes differ)",
             t->topo.cp > 1 ? " x context-parallel" : "");
    return -1;
  }
  if (t->cfg->model.num_experts > 0 && mt_group_size(t->ps->edp) > 1 &&
      !agree_u64(t->ps->edp, param_hash(t, 2))) {
    snprintf(err, errlen, "expert parameters differ across the expert-data-parallel group");
    return -1;
  }
  /* tied word embedding: first stage's and last stage's copies */
  if (t->topo.pp > 1 && !t->cfg->model.untie_embeddings_and_output_weights && t->ps->embd) {
    int idx = mt_params_find(mt_gpt_params(t->model), "embedding.word_embeddings.weight");
    uint64_t h = MT_FNV1A64_INIT;
    if (idx >= 0) {
      const mt_param *p = &mt_gpt_params(t->model)->p[idx];
      unsigned char *host = NULL;
      size_t cap = 0;
      h = hash_dev(t, h, mt_gpt_param_ptr(t->model, idx),
                   (size_t)p->numel * mt_dtype_size(t->be->dtype), &host, &cap);
      const float *mw = master_of(t, idx);
      if (mw) h = hash_dev(t, h, mw, (size_t)p->numel * sizeof(float), &host, &cap);
      free(host);
    }
    if (!agree_u64(t->ps->embd, h)) {
      snprintf(err, errlen, "the word-embedding copies of the first and last pipeline stage "
                            "differ");
      return -1;
    }
  }
  if (mt_trainer_check_expert_bias(t, err, errlen) != 0) return -1;
  if (t->topo.tp > 1 && !agree_u64(t->ps->tp, param_hash(t, 1))) {
    snprintf(err, errlen,
             "replicated parameters (norm weights and biases incl. q/k norms, position "
             "embedding, row-parallel biases) differ across the tensor-parallel group");
    return -1;
  }
  return 0;
}
