/* parallel/parallel_state.h — every group handle of this rank (Megatron's
 * parallel_state / picotron's process-group manager), built from a topology.
 */
#ifndef MT_PARALLEL_PARALLEL_STATE_H
#define MT_PARALLEL_PARALLEL_STATE_H

#include "comm.h"
#include "topology.h"

typedef struct {
  const mt_topology *topo; /* borrowed; must outlive the state */
  mt_comm_engine engine;
  int rank, world;
  mt_rank_coords coords;   /* tp/cp/pp/dp and etp/ep/edp coordinates of this rank */
  int tp_rank, cp_rank, pp_rank, dp_rank, ep_rank, etp_rank, edp_rank; /* = coords.* */
  int dp_cp_rank;          /* rank in dp_cp = cp_rank + cp * dp_rank */
  int is_first_stage, is_last_stage; /* pipeline */
  /* Group handles, NULL only for embd on middle pipeline stages.
   * dp_cp is Megatron's data_parallel_group_with_context_parallel: the
   * group gradients are reduced over and ZeRO shards over; when cp == 1 it
   * is the same handle as dp (same ranks; Megatron creates a second
   * communicator, megatrain does not, so dp's counters carry the traffic).
   * cp is the attention ring (size 1 when cp == 1); tp_cp = tp x cp. */
  mt_group *tp, *pp, *dp, *mp, *tp_dp, *embd, *ep, *etp, *etp_ep, *edp, *cp, *dp_cp, *tp_cp,
      *world_group;
  mt_group *by_kind[MT_GK_N]; /* the same handles indexed by mt_group_kind */
} mt_parallel_state;

/* Create this rank's groups. Collective over the world: every rank calls it
 * with the same topology (built for mt_dist_size(d) ranks; fatal otherwise).
 * Groups are created in the fixed order of mt_group_kind (tp, pp, dp, mp,
 * tp_dp, embd, ep, etp, etp_ep, edp, cp, dp_cp (not when cp == 1: aliased to
 * dp), tp_cp) then world, all with `engine`; counters are labelled with
 * mt_group_kind_name. */
mt_parallel_state *mt_parallel_state_create(mt_dist *d, const mt_topology *t,
                                            mt_comm_engine engine);
/* Destroy every group (not the topology or d). NULL is a no-op. */
void mt_parallel_state_destroy(mt_parallel_state *ps);

/* 1 when by_kind[k] is the same handle as an earlier kind's (dp_cp when
 * cp == 1): loops over the kinds skip it so traffic is counted once. */
int mt_parallel_state_is_alias(const mt_parallel_state *ps, mt_group_kind k);


#endif
