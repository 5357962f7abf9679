/* tests/support/probe_parallel.c — a group's engine and members' world
 * ranks, and the loaded NCCL's description (tests/support/probes.h). */
#include <stdio.h>

#include "core/util.h"
#include "parallel/comm_impl.h"
#include "tests/support/probes.h"

const char *mt_group_name(const mt_group *g) { return g->name; }

static const char *const coll_names[MT_COLL_N] = {
    "all_reduce", "all_gather", "reduce_scatter", "all_to_all",
    "all_to_allv", "broadcast",  "send_recv",      "barrier"};

const char *mt_coll_name(mt_coll_kind k) {
  return (k >= 0 && k < MT_COLL_N) ? coll_names[k] : "?";
}

mt_comm_engine mt_group_engine(const mt_group *g) { return g->engine; }

int mt_group_world_rank(const mt_group *g, int i) {
  MT_ASSERT(i >= 0 && i < g->size);
  return g->world_ranks[i];
}

#ifdef MT_HAVE_NCCL
void mt_nccl_api_describe(const mt_nccl_api *a, char *buf, size_t len) {
  snprintf(buf, len, "NCCL %d.%d.%d (%s)", a->version / 10000, a->version / 100 % 100,
           a->version % 100, a->path);
}
#endif
