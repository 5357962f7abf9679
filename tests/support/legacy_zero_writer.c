/* tests/support/legacy_zero_writer.c — the ZeRO shard files of the previous
 * checkpoint format (mt_zero_ckpt_save, tests/support/legacy_writer.h; the
 * layout is checkpoint/legacy_format.h's, read by checkpoint/legacy_zero.c).
 * Test code: not part of the megatrain library. */
#include <stdlib.h>
#include <string.h>

#include "checkpoint/legacy_zero.h"
#include "core/util.h"
#include "tests/support/legacy_writer.h"

static unsigned char *put_part(mt_zero_opt *z, const mt_zero_part *P, unsigned char *p) {
  mt_backend *be = z->be;
  const int64_t sn = P->L.shard_numel;
  const size_t es = mt_dtype_size(be->dtype), fb = (size_t)sn * sizeof(float);
  if (z->o.stage == 3) {
    be->ops->memcpy_d2h(be, p, P->param_shard, (size_t)sn * es);
  } else {
    void *tmp = be->ops->alloc(be, (size_t)sn * es + 1, MT_MEM_COMM);
    mt_zero_flat_to_shard(be, &P->L, mt_gpt_param_buffer(z->model), tmp, be->dtype);
    be->ops->memcpy_d2h(be, p, tmp, (size_t)sn * es);
    be->ops->free(be, tmp);
  }
  p += (size_t)sn * es;
  be->ops->memcpy_d2h(be, p, P->m, fb);
  p += fb;
  be->ops->memcpy_d2h(be, p, P->v, fb);
  p += fb;
  if (P->master) {
    be->ops->memcpy_d2h(be, p, P->master, fb);
    p += fb;
  }
  return p;
}

int mt_zero_ckpt_save(void *ctx, const mt_ckpt_state *st, const char *mp_dir, char *err,
                      size_t errlen) {
  mt_zero_opt *z = ctx;
  mt_backend *be = z->be;
  const mt_zero_part *D = &z->part[0], *X = z->n_part > 1 ? &z->part[1] : NULL;
  mt_legacy_zhdr h = {.version = X ? MT_LEGACY_ZVERSION_MOE : MT_LEGACY_ZVERSION,
            .stage = (uint32_t)z->o.stage,
            .dp = (uint32_t)D->L.dp,
            .dp_rank = (uint32_t)D->L.dp_rank,
            .dtype = (uint32_t)be->dtype,
            .has_master = D->master != NULL,
            .flat_numel = D->L.flat_numel,
            .shard_numel = D->L.shard_numel,
            .bucket_size = D->L.bucket_size,
            .iteration = st->iteration,
            .consumed_samples = st->consumed_samples,
            .step = z->step,
            .skipped_iters = st->skipped_iters,
            .nan_iters = st->nan_iters,
            .seed = st->seed};
  memcpy(h.magic, MT_LEGACY_ZMAGIC, 8);
  size_t total = sizeof h + mt_legacy_zero_part_bytes(z, D) + (X ? sizeof(mt_legacy_zexp) + mt_legacy_zero_part_bytes(z, X) : 0);
  unsigned char *buf = mt_xmalloc(total), *p = buf;
  memcpy(p, &h, sizeof h);
  p += sizeof h;
  if (X) {
    mt_legacy_zexp x = mt_legacy_zero_exp(z, X);
    memcpy(p, &x, sizeof x);
    p += sizeof x;
  }
  p = put_part(z, D, p);
  if (X) p = put_part(z, X, p);
  MT_ASSERT((size_t)(p - buf) == total);
  char path[4600];
  mt_legacy_zero_shard_path(path, sizeof path, mp_dir, D->L.dp_rank);
  int rc = mt_ckpt_write_with_crc(path, buf, total, err, errlen);
  free(buf);
  return rc;
}

