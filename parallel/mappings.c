/* parallel/mappings.c — see mappings.h. */
#include "parallel/mappings.h"

#include "core/util.h"

static int trivial(const mt_group *g) { return g == NULL || mt_group_size(g) == 1; }

void mt_tp_all_reduce(mt_group *tp, void *x, int64_t n, mt_dtype t) {
  if (!trivial(tp)) mt_allreduce(tp, x, n, t, MT_OP_SUM);
}

void mt_sp_all_gather(mt_group *tp, const void *shard, void *full, int64_t shard_n, mt_dtype t) {
  if (trivial(tp)) {
    MT_ASSERT(full == shard);
    return;
  }
  mt_allgather(tp, shard, full, shard_n, t);
}

void mt_sp_reduce_scatter(mt_group *tp, const void *full, void *shard, int64_t shard_n, mt_dtype t) {
  if (trivial(tp)) {
    MT_ASSERT(full == shard);
    return;
  }
  mt_reduce_scatter(tp, full, shard, shard_n, t, MT_OP_SUM);
}
