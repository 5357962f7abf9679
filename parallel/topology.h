/* parallel/topology.h — rank coordinates and process groups (pure, no MPI).
 *
 * Reproduces Megatron-LM's parallel_state.initialize_model_parallel with the
 * default order "tp-cp-ep-dp-pp" (tp varies fastest, pp slowest):
 *   dense generator:  sizes tp, cp, ep=1, dp = world/(tp*cp*pp), pp
 *     rank = tp_rank + tp*(cp_rank + cp*(dp_rank + dp*pp_rank))
 *   expert generator ("MoE parallel folding"): tp=etp, ep, dp=edp, pp, cp=1,
 *     edp = world/(etp*ep*pp)
 *     rank = etp_rank + etp*(ep_rank + ep*(edp_rank + edp*pp_rank))
 *   As in Megatron the expert generator has no cp dimension: the cp ranks of
 *   the dense generator are folded into ep x edp (expert layers are
 *   token-local, so a CP rank is just another holder of tokens); with
 *   etp = 1 and ep = tp the expert-data-parallel group is the dense dp x cp
 *   group.
 * A group of kind "a-b" holds the ranks that differ only in the coordinates
 * a and b (Megatron's generate_masked_orthogonal_rank_groups); groups are
 * listed by the remaining coordinates, first dimension fastest, and each
 * group's ranks are increasing. The embedding group of a pipeline group is
 * its first and last stage (one rank when pp == 1). docs/topology.md.
 */
#ifndef MT_PARALLEL_TOPOLOGY_H
#define MT_PARALLEL_TOPOLOGY_H

#include <stddef.h>
#include <stdio.h>

/* Requested sizes (Megatron argument names). 0 means the default:
 * 1 for all, except expert_tensor_parallel_size which defaults to tp. */
typedef struct {
  int tensor_model_parallel_size;
  int pipeline_model_parallel_size;
  int expert_model_parallel_size;
  int expert_tensor_parallel_size;
  int context_parallel_size; /* cp: ranks sharing one sequence (attention ring) */
} mt_topology_sizes;

/* Group kinds, in the order mt_parallel_state creates them. */
typedef enum {
  MT_GK_TP = 0,   /* tensor parallel                           ("tp")     */
  MT_GK_PP,       /* pipeline parallel                         ("pp")     */
  MT_GK_DP,       /* data parallel                             ("dp")     */
  MT_GK_MP,       /* model parallel = tp x pp                  ("tp-pp")  */
  MT_GK_TP_DP,    /* tensor x data parallel                    ("tp-dp")  */
  MT_GK_EMBD,     /* first and last pipeline stage             (embedding)*/
  MT_GK_EP,       /* expert model parallel       (expert gen.) ("ep")     */
  MT_GK_ETP,      /* expert tensor parallel      (expert gen.) ("tp")     */
  MT_GK_ETP_EP,   /* expert tensor x expert model(expert gen.) ("tp-ep")  */
  MT_GK_EDP,      /* expert data parallel        (expert gen.) ("dp")     */
  MT_GK_CP,       /* context parallel: the attention ring      ("cp")     */
  MT_GK_DP_CP,    /* data x context parallel: gradients, ZeRO  ("dp-cp")  */
  MT_GK_TP_CP,    /* tensor x context parallel                 ("tp-cp")  */
  MT_GK_N
} mt_group_kind;

/* Short lowercase name of a kind ("tp", "pp", "dp", "mp", "tp_dp", "embd",
 * "ep", "etp", "etp_ep", "edp", "cp", "dp_cp", "tp_cp"). dp_cp is Megatron's
 * data_parallel_group_with_context_parallel (get_data_parallel_group(
 * with_context_parallel=True)); tp_cp its _TENSOR_AND_CONTEXT_PARALLEL_GROUP. */
const char *mt_group_kind_name(mt_group_kind k);

/* All groups of one kind: n_groups groups of group_size ranks each,
 * ranks[g * group_size + i] = world rank of member i of group g. */
typedef struct {
  int n_groups;
  int group_size;
  int *ranks;
} mt_group_list;

/* Coordinates of one rank in both generators. */
typedef struct {
  int tp, cp, dp, pp;     /* dense generator  */
  int etp, ep, edp;       /* expert generator (pp is shared) */
} mt_rank_coords;

typedef struct {
  int world;
  int tp, cp, pp, dp;     /* dense sizes  */
  int etp, ep, edp;       /* expert sizes */
  mt_group_list lists[MT_GK_N];
} mt_topology;

/* Derive dp/edp and build every group list for `world` ranks.
 * Returns 0 on success; on inconsistent sizes returns -1, writes a message
 * naming the numbers into err[errlen] and leaves *t empty (safe to free).
 * Errors: a size < 1 or world < 1, world not divisible by tp*cp*pp,
 * or by etp*ep*pp (equivalently etp*ep not dividing tp*dp). */
int mt_topology_build(mt_topology *t, int world, const mt_topology_sizes *sz, char *err,
                      size_t errlen);
void mt_topology_free(mt_topology *t);

/* Coordinates of world rank r (0 <= r < world). */
mt_rank_coords mt_topology_coords(const mt_topology *t, int rank);

/* Group list of a kind. */
const mt_group_list *mt_topology_groups(const mt_topology *t, mt_group_kind k);

/* Ranks of the group of kind k that contains `rank` (group_size entries,
 * increasing) and *n = its size; NULL and *n = 0 when the rank is in no
 * group of that kind (only MT_GK_EMBD: middle pipeline stages). */
const int *mt_topology_group_of(const mt_topology *t, mt_group_kind k, int rank, int *n);

/* Print the topology: a human table (sizes, every group list, per-rank
 * coordinates) or, with json != 0, one JSON object
 * {"world":..,"sizes":{..},"groups":{"tp":[[..],..],..},"ranks":[{..},..]}.
 * Returns 0, or -1 on an output error. */
int mt_topology_print(const mt_topology *t, FILE *f, int json);

#endif
