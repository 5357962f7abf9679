/* parallel/parallel_state.c — see parallel_state.h. */
#include "parallel_state.h"

#include <inttypes.h>
#include <stdlib.h>

#include "../core/util.h"

mt_parallel_state *mt_parallel_state_create(mt_dist *d, const mt_topology *t,
                                            mt_comm_engine engine) {
  if (t->world != mt_dist_size(d))
    mt_fatal("topology built for %d ranks but the job has %d", t->world, mt_dist_size(d));
  mt_parallel_state *ps = mt_xcalloc(1, sizeof(mt_parallel_state));
  ps->topo = t;
  ps->engine = engine;
  ps->rank = mt_dist_rank(d);
  ps->world = mt_dist_size(d);
  ps->coords = mt_topology_coords(t, ps->rank);
  ps->tp_rank = ps->coords.tp;
  ps->cp_rank = ps->coords.cp;
  ps->dp_cp_rank = ps->coords.cp + t->cp * ps->coords.dp;
  ps->pp_rank = ps->coords.pp;
  ps->dp_rank = ps->coords.dp;
  ps->ep_rank = ps->coords.ep;
  ps->etp_rank = ps->coords.etp;
  ps->edp_rank = ps->coords.edp;
  ps->is_first_stage = ps->pp_rank == 0;
  ps->is_last_stage = ps->pp_rank == t->pp - 1;

  for (int k = 0; k < MT_GK_N; k++) {
    if (k == MT_GK_DP_CP && t->cp == 1) { /* same ranks as dp: one communicator */
      ps->by_kind[k] = ps->by_kind[MT_GK_DP];
      continue;
    }
    int n;
    const int *ranks = mt_topology_group_of(t, (mt_group_kind)k, ps->rank, &n);
    ps->by_kind[k] = mt_group_create(d, ranks, n, mt_group_kind_name((mt_group_kind)k), engine);
  }
  ps->tp = ps->by_kind[MT_GK_TP];
  ps->pp = ps->by_kind[MT_GK_PP];
  ps->dp = ps->by_kind[MT_GK_DP];
  ps->mp = ps->by_kind[MT_GK_MP];
  ps->tp_dp = ps->by_kind[MT_GK_TP_DP];
  ps->embd = ps->by_kind[MT_GK_EMBD];
  ps->ep = ps->by_kind[MT_GK_EP];
  ps->etp = ps->by_kind[MT_GK_ETP];
  ps->etp_ep = ps->by_kind[MT_GK_ETP_EP];
  ps->edp = ps->by_kind[MT_GK_EDP];
  ps->cp = ps->by_kind[MT_GK_CP];
  ps->dp_cp = ps->by_kind[MT_GK_DP_CP];
  ps->tp_cp = ps->by_kind[MT_GK_TP_CP];

  int *all = mt_xmalloc(sizeof(int) * (size_t)ps->world);
  for (int i = 0; i < ps->world; i++) all[i] = i;
  ps->world_group = mt_group_create(d, all, ps->world, "world", engine);
  free(all);
  mt_dist_check_sim_link(d); /* every named link is some group's */
  return ps;
}

int mt_parallel_state_is_alias(const mt_parallel_state *ps, mt_group_kind k) {
  if (!ps->by_kind[k]) return 0;
  for (int j = 0; j < (int)k; j++)
    if (ps->by_kind[j] == ps->by_kind[k]) return 1;
  return 0;
}

void mt_parallel_state_destroy(mt_parallel_state *ps) {
  if (!ps) return;
  for (int k = 0; k < MT_GK_N; k++)
    if (!mt_parallel_state_is_alias(ps, (mt_group_kind)k)) mt_group_destroy(ps->by_kind[k]);
  mt_group_destroy(ps->world_group);
  free(ps);
}

