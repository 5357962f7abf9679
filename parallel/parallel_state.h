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
  mt_rank_coords coords;   /* tp/pp/dp and etp/ep/edp coordinates of this rank */
  int tp_rank, pp_rank, dp_rank, ep_rank, etp_rank, edp_rank; /* = coords.* */
  int is_first_stage, is_last_stage; /* pipeline */
  /* Group handles, NULL only for embd on middle pipeline stages. */
  mt_group *tp, *pp, *dp, *mp, *tp_dp, *embd, *ep, *etp, *etp_ep, *edp, *world_group;
  mt_group *by_kind[MT_GK_N]; /* the same handles indexed by mt_group_kind */
} mt_parallel_state;

/* Create this rank's groups. Collective over the world: every rank calls it
 * with the same topology (built for mt_dist_size(d) ranks; fatal otherwise).
 * Groups are created in the fixed order of mt_group_kind (tp, pp, dp, mp,
 * tp_dp, embd, ep, etp, etp_ep, edp) then world, all with `engine`; counters
 * are labelled with mt_group_kind_name. */
mt_parallel_state *mt_parallel_state_create(mt_dist *d, const mt_topology *t,
                                            mt_comm_engine engine);
/* Destroy every group (not the topology or d). NULL is a no-op. */
void mt_parallel_state_destroy(mt_parallel_state *ps);

/* Print, per group kind of this rank, the counters with calls > 0:
 * "group op calls bytes bus_bytes" lines. */
void mt_parallel_state_print_counters(const mt_parallel_state *ps, FILE *f);

#endif
