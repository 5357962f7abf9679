/* parallel/topology.c — see topology.h. Pure arithmetic, no MPI. */
#include "topology.h"

#include <stdlib.h>
#include <string.h>

#include "../core/util.h"

/* Dimensions in Megatron's default order "tp-cp-ep-dp-pp" (fastest first). */
enum { D_TP = 0, D_CP, D_EP, D_DP, D_PP, D_N };

static const char *const kind_names[MT_GK_N] = {"tp",  "pp",  "dp",     "mp",  "tp_dp",
                                                "embd", "ep",  "etp",    "etp_ep", "edp",
                                                "cp",   "dp_cp", "tp_cp"};

const char *mt_group_kind_name(mt_group_kind k) {
  return (k >= 0 && k < MT_GK_N) ? kind_names[k] : "?";
}

/* Groups of ranks that differ only in the dimensions with mask[d] set.
 * Group index enumerates the unmasked coordinates, the rank within a group
 * the masked ones, in both cases the earlier dimension varying fastest. */
static void masked_groups(mt_group_list *out, const int size[D_N], const int mask[D_N]) {
  int stride[D_N], world = 1;
  for (int d = 0; d < D_N; d++) {
    stride[d] = world;
    world *= size[d];
  }
  int gsize = 1;
  for (int d = 0; d < D_N; d++)
    if (mask[d]) gsize *= size[d];
  out->group_size = gsize;
  out->n_groups = world / gsize;
  out->ranks = mt_xmalloc(sizeof(int) * (size_t)world);
  for (int g = 0; g < out->n_groups; g++) {
    int base = 0, rem = g;
    for (int d = 0; d < D_N; d++)
      if (!mask[d]) {
        base += (rem % size[d]) * stride[d];
        rem /= size[d];
      }
    for (int i = 0; i < gsize; i++) {
      int off = 0, r = i;
      for (int d = 0; d < D_N; d++)
        if (mask[d]) {
          off += (r % size[d]) * stride[d];
          r /= size[d];
        }
      out->ranks[g * gsize + i] = base + off;
    }
  }
}

static void groups_by_mask(mt_group_list *out, const int size[D_N], int m0, int m1) {
  int mask[D_N] = {0};
  mask[m0] = 1;
  if (m1 >= 0) mask[m1] = 1;
  masked_groups(out, size, mask);
}

/* Embedding groups: first and last stage of each pipeline group. */
static void embedding_groups(mt_group_list *out, const mt_group_list *pp) {
  int k = pp->group_size > 1 ? 2 : 1;
  out->n_groups = pp->n_groups;
  out->group_size = k;
  out->ranks = mt_xmalloc(sizeof(int) * (size_t)(k * pp->n_groups));
  for (int g = 0; g < pp->n_groups; g++) {
    out->ranks[g * k] = pp->ranks[g * pp->group_size];
    if (k == 2) out->ranks[g * k + 1] = pp->ranks[g * pp->group_size + pp->group_size - 1];
  }
}

static int fail(mt_topology *t, char *err, size_t errlen, const char *msg) {
  if (err && errlen) snprintf(err, errlen, "%s", msg);
  mt_topology_free(t);
  return -1;
}

int mt_topology_build(mt_topology *t, int world, const mt_topology_sizes *sz, char *err,
                      size_t errlen) {
  char msg[256];
  memset(t, 0, sizeof(*t));
  int tp = sz->tensor_model_parallel_size ? sz->tensor_model_parallel_size : 1;
  int pp = sz->pipeline_model_parallel_size ? sz->pipeline_model_parallel_size : 1;
  int ep = sz->expert_model_parallel_size ? sz->expert_model_parallel_size : 1;
  int etp = sz->expert_tensor_parallel_size ? sz->expert_tensor_parallel_size : tp;
  int cp = sz->context_parallel_size ? sz->context_parallel_size : 1;
  if (world < 1 || tp < 1 || pp < 1 || ep < 1 || etp < 1 || cp < 1) {
    snprintf(msg, sizeof msg,
             "invalid sizes: world_size %d, tensor_model_parallel_size %d, "
             "pipeline_model_parallel_size %d, expert_model_parallel_size %d, "
             "expert_tensor_parallel_size %d, context_parallel_size %d (all must be >= 1)",
             world, tp, pp, ep, etp, cp);
    return fail(t, err, errlen, msg);
  }
  if (world % (tp * cp * pp) != 0) {
    snprintf(msg, sizeof msg,
             "world_size %d is not divisible by tensor_model_parallel_size %d x "
             "context_parallel_size %d x pipeline_model_parallel_size %d = %d",
             world, tp, cp, pp, tp * cp * pp);
    return fail(t, err, errlen, msg);
  }
  int dp = world / (tp * cp * pp);
  if (world % (etp * ep * pp) != 0) {
    snprintf(msg, sizeof msg,
             "expert_tensor_parallel_size %d x expert_model_parallel_size %d = %d does not "
             "divide tensor_model_parallel_size %d x data_parallel_size %d = %d "
             "(world_size %d, pipeline_model_parallel_size %d)",
             etp, ep, etp * ep, tp, dp, tp * dp, world, pp);
    return fail(t, err, errlen, msg);
  }
  t->world = world;
  t->tp = tp, t->cp = cp, t->pp = pp, t->dp = dp;
  t->etp = etp, t->ep = ep, t->edp = world / (etp * ep * pp);

  const int dense[D_N] = {tp, cp, 1, dp, pp};
  const int expert[D_N] = {etp, 1, ep, t->edp, pp};
  groups_by_mask(&t->lists[MT_GK_TP], dense, D_TP, -1);
  groups_by_mask(&t->lists[MT_GK_PP], dense, D_PP, -1);
  groups_by_mask(&t->lists[MT_GK_DP], dense, D_DP, -1);
  groups_by_mask(&t->lists[MT_GK_MP], dense, D_TP, D_PP);
  groups_by_mask(&t->lists[MT_GK_TP_DP], dense, D_TP, D_DP);
  embedding_groups(&t->lists[MT_GK_EMBD], &t->lists[MT_GK_PP]);
  groups_by_mask(&t->lists[MT_GK_EP], expert, D_EP, -1);
  groups_by_mask(&t->lists[MT_GK_ETP], expert, D_TP, -1);
  groups_by_mask(&t->lists[MT_GK_ETP_EP], expert, D_TP, D_EP);
  groups_by_mask(&t->lists[MT_GK_EDP], expert, D_DP, -1);
  groups_by_mask(&t->lists[MT_GK_CP], dense, D_CP, -1);
  groups_by_mask(&t->lists[MT_GK_DP_CP], dense, D_CP, D_DP);
  groups_by_mask(&t->lists[MT_GK_TP_CP], dense, D_TP, D_CP);

  /* Megatron asserts the two generators agree on the pipeline groups. */
  mt_group_list epp;
  groups_by_mask(&epp, expert, D_PP, -1);
  int same = epp.n_groups == t->lists[MT_GK_PP].n_groups &&
             memcmp(epp.ranks, t->lists[MT_GK_PP].ranks, sizeof(int) * (size_t)world) == 0;
  free(epp.ranks);
  MT_ASSERT(same);
  return 0;
}

void mt_topology_free(mt_topology *t) {
  for (int k = 0; k < MT_GK_N; k++) {
    free(t->lists[k].ranks);
    t->lists[k].ranks = NULL;
    t->lists[k].n_groups = t->lists[k].group_size = 0;
  }
}

mt_rank_coords mt_topology_coords(const mt_topology *t, int rank) {
  MT_ASSERT(rank >= 0 && rank < t->world);
  mt_rank_coords c;
  int r = rank;
  c.tp = r % t->tp, r /= t->tp;
  c.cp = r % t->cp, r /= t->cp;
  c.dp = r % t->dp, r /= t->dp;
  c.pp = r;
  r = rank;
  c.etp = r % t->etp, r /= t->etp;
  c.ep = r % t->ep, r /= t->ep;
  c.edp = r % t->edp;
  return c;
}

const mt_group_list *mt_topology_groups(const mt_topology *t, mt_group_kind k) {
  MT_ASSERT(k >= 0 && k < MT_GK_N);
  return &t->lists[k];
}

const int *mt_topology_group_of(const mt_topology *t, mt_group_kind k, int rank, int *n) {
  const mt_group_list *l = mt_topology_groups(t, k);
  for (int g = 0; g < l->n_groups; g++)
    for (int i = 0; i < l->group_size; i++)
      if (l->ranks[g * l->group_size + i] == rank) {
        *n = l->group_size;
        return l->ranks + g * l->group_size;
      }
  *n = 0;
  return NULL;
}
