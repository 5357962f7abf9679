/* parallel/ddp.c — bucketed data-parallel gradient all-reduce (see ddp.h). */
#include "parallel/ddp.h"

#include <stdlib.h>
#include <string.h>

#include "core/util.h"

void mt_ddp_buffer_build(mt_ddp_buffer *B, const mt_ddp_range *ranges, int n_ranges,
                         int64_t bucket_size) {
  memset(B, 0, sizeof *B);
  B->bucket_size = bucket_size;
  int cap = 0;
  for (int i = 0; i < n_ranges; i++) {
    const mt_ddp_range *r = &ranges[i];
    if (r->end <= r->start || !r->group || mt_group_size(r->group) <= 1) continue;
    const int64_t bs = bucket_size > 0 ? bucket_size : r->end - r->start;
    for (int64_t off = r->start; off < r->end; off += bs) {
      if (B->n_bkt == cap) {
        cap = cap ? 2 * cap : 8;
        B->bkt = mt_xrealloc(B->bkt, (size_t)cap * sizeof *B->bkt);
      }
      int64_t len = r->end - off < bs ? r->end - off : bs;
      B->bkt[B->n_bkt++] = (mt_ddp_bucket){off, len, r->group};
    }
  }
}

void mt_ddp_buffer_free(mt_ddp_buffer *B) {
  free(B->bkt);
  memset(B, 0, sizeof *B);
}

void mt_ddp_allreduce(const mt_ddp_buffer *B, float *grad) {
  for (int i = 0; i < B->n_bkt; i++)
    mt_allreduce(B->bkt[i].group, grad + B->bkt[i].offset, B->bkt[i].len, MT_F32, MT_OP_SUM);
}
