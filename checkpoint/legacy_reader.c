/* checkpoint/legacy_reader.c — loading model_optim_rng.bin checkpoints of
 * the previous format (see legacy_reader.h, legacy_format.h). */
#include "checkpoint/legacy_reader.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checkpoint/dist_checkpoint.h"
#include "checkpoint/legacy_records.h"
#include "core/fileio.h"
#include "core/util.h"

static const char *k_rec_names[] = {"param", "exp_avg", "exp_avg_sq", "master"};

/* Agree on a status over all ranks: returns the max of the local values. */
static int agree(mt_group *world, int local) {
  int32_t v = local;
  if (world) mt_allreduce(world, &v, 1, MT_I32, MT_OP_MAX);
  return v;
}

int64_t mt_checkpoint_latest(const char *dir) { return mt_dckpt_latest(dir); }


/* ---------- loading ---------- */
typedef struct {
  const unsigned char *p;
  size_t n, off;
  int bad;
} rd_t;

static void rd(rd_t *r, void *dst, size_t n) {
  if (r->bad || r->off + n > r->n) {
    r->bad = 1;
    memset(dst, 0, n);
    return;
  }
  memcpy(dst, r->p + r->off, n);
  r->off += n;
}
#define GET(r, v) rd((r), &(v), sizeof(v))

/* Validate and apply one checkpoint file; returns 0 or -1 with err. */
static int load_file(const char *path, mt_ckpt_state *st, mt_adamw *opt,
                     const mt_ckpt_layout *L, char *err, size_t errlen) {
  size_t n = 0;
  unsigned char *data = mt_ckpt_read_whole(path, &n, err, errlen);
  if (!data) return -1;
  int rc = -1;
  if (n < 8 + 4 + 4 || memcmp(data, MT_LEGACY_CKPT_MAGIC, 8) != 0) {
    snprintf(err, errlen, "'%s' is not a megatrain checkpoint (bad magic or truncated)", path);
    goto out;
  }
  uint32_t stored_crc;
  memcpy(&stored_crc, data + n - 4, 4);
  if (mt_crc32(0, data, n - 4) != stored_crc) {
    snprintf(err, errlen, "checksum mismatch in '%s' (file corrupt or truncated)", path);
    goto out;
  }
  rd_t r = {data, n - 4, 8, 0};
  uint32_t version, nrec;
  mt_ckpt_state s;
  int64_t step;
  GET(&r, version);
  GET(&r, nrec);
  GET(&r, s.iteration);
  GET(&r, s.consumed_samples);
  GET(&r, step);
  GET(&r, s.skipped_iters);
  GET(&r, s.nan_iters);
  GET(&r, s.seed);
  if (version != MT_LEGACY_CKPT_VERSION) {
    snprintf(err, errlen, "'%s' has format version %u, this megatrain reads %u", path, version,
             MT_LEGACY_CKPT_VERSION);
    goto out;
  }
  mt_backend *be = opt->be;
  const mt_param_list *pl = opt->params;
  int has_master = opt->master != opt->param_buf;
  /* pass 1: validate everything; pass 2: copy */
  for (int pass = 0; pass < 2; pass++) {
    r.off = 8 + 8 + 8 * 6;
    r.bad = 0;
    int seen[5] = {0, 0, 0, 0, 0};
    for (uint32_t k = 0; k < nrec; k++) {
      uint32_t name_len, kind, dtype;
      char name[MT_PARAM_NAME_MAX + 1];
      int64_t shape[6];
      uint64_t nbytes;
      GET(&r, name_len);
      if (r.bad || name_len > MT_PARAM_NAME_MAX) {
        snprintf(err, errlen, "'%s': malformed record %u", path, k);
        goto out;
      }
      rd(&r, name, name_len);
      name[name_len] = '\0';
      GET(&r, kind);
      GET(&r, dtype);
      rd(&r, shape, sizeof shape);
      GET(&r, nbytes);
      if (r.bad || kind > MT_CKPT_REC_BUFFER || r.off + nbytes > r.n) {
        snprintf(err, errlen, "'%s': truncated or malformed record '%s'", path, name);
        goto out;
      }
      if (kind == MT_CKPT_REC_BUFFER) { /* non-parameter state (expert bias) */
        if (mt_ckpt_buffer_record(L, path, name, dtype, shape, nbytes, r.p + r.off, pass, err,
                                  errlen))
          goto out;
        seen[kind]++;
        r.off += nbytes;
        continue;
      }
      int idx = mt_params_find(pl, name);
      if (idx < 0) {
        snprintf(err, errlen,
                 "checkpoint tensor '%s' does not exist in the model built from the config "
                 "(model shape differs from the checkpoint)",
                 name);
        goto out;
      }
      const mt_param *p = &pl->p[idx];
      if (shape[0] != p->rows || shape[1] != p->cols || shape[2] != p->local_rows ||
          shape[3] != p->local_cols || shape[4] != p->row_offset || shape[5] != p->col_offset) {
        snprintf(err, errlen,
                 "checkpoint tensor '%s' has shape [%lld, %lld] (local [%lld, %lld]) but the "
                 "config gives [%lld, %lld] (local [%lld, %lld])",
                 name, (long long)shape[0], (long long)shape[1], (long long)shape[2],
                 (long long)shape[3], (long long)p->rows, (long long)p->cols,
                 (long long)p->local_rows, (long long)p->local_cols);
        goto out;
      }
      size_t el = kind == MT_CKPT_REC_PARAM ? mt_dtype_size(be->dtype) : sizeof(float);
      if ((kind == MT_CKPT_REC_PARAM && dtype != (uint32_t)be->dtype) ||
          nbytes != (uint64_t)p->numel * el) {
        snprintf(err, errlen, "checkpoint tensor '%s' (%s) has dtype/size that does not match",
                 name, k_rec_names[kind]);
        goto out;
      }
      if (pass == 1) {
        void *dst = NULL;
        switch (kind) {
          case MT_CKPT_REC_PARAM: dst = (char *)opt->param_buf + (size_t)p->offset * el; break;
          case MT_CKPT_REC_EXP_AVG: dst = opt->m + p->offset; break;
          case MT_CKPT_REC_EXP_AVG_SQ: dst = opt->v + p->offset; break;
          default: dst = has_master ? (void *)(opt->master + p->offset) : NULL; break;
        }
        if (dst) be->ops->memcpy_h2d(be, dst, r.p + r.off, nbytes);
      }
      seen[kind]++;
      r.off += nbytes;
    }
    if (pass == 0) {
      for (int k = 0; k < 3; k++)
        if (seen[k] != pl->n) {
          snprintf(err, errlen, "'%s': has %d %s tensors, the model has %d", path, seen[k],
                   k_rec_names[k], pl->n);
          goto out;
        }
      if (mt_ckpt_buffers_missing(L, seen[MT_CKPT_REC_BUFFER], path, err, errlen)) goto out;
    }
  }
  *st = s;
  opt->step = step;
  rc = 0;
out:
  free(data);
  return rc;
}

int mt_checkpoint_load(const char *load_dir, mt_ckpt_state *st, mt_adamw *opt,
                       const mt_ckpt_layout *layout, char *err, size_t errlen) {
  err[0] = '\0';
  int rc = 0;
  int64_t it = mt_checkpoint_latest(load_dir);
  char mp[64], path[4400];
  if (it < 0) {
    snprintf(err, errlen,
             "no checkpoint to load: '%s/latest_checkpointed_iteration.txt' is missing or "
             "unreadable",
             load_dir);
    rc = 1;
  } else {
    mt_ckpt_mp_dir_name(mp, sizeof mp, layout);
    if (layout->shard_load) {
      snprintf(path, sizeof path, "%s/iter_%07lld/%s", load_dir, (long long)it, mp);
      char bpath[4500];
      snprintf(bpath, sizeof bpath, "%s/model_buffers.bin", path);
      if (mt_ckpt_buffers_load_file(bpath, layout, err, errlen) != 0 ||
          layout->shard_load(layout->shard_ctx, st, path, err, errlen) != 0)
        rc = 1;
    } else {
      snprintf(path, sizeof path, "%s/iter_%07lld/%s/model_optim_rng.bin", load_dir,
               (long long)it, mp);
      if (load_file(path, st, opt, layout, err, errlen) != 0) {
        rc = 1;
        char zpath[4500];
        snprintf(zpath, sizeof zpath, "%s/iter_%07lld/%s/distrib_optim_dp000.bin", load_dir,
                 (long long)it, mp);
        if (access(path, F_OK) != 0 && access(zpath, F_OK) == 0) /* only when missing */
          snprintf(err, errlen,
                   "checkpoint '%s/iter_%07lld' was saved with ZeRO (parallel.zero_stage >= 1: "
                   "per-rank distrib_optim_dp*.bin shards) but this run has zero_stage 0; resume "
                   "with the zero_stage and data-parallel size it was saved with",
                   load_dir, (long long)it);
      }
    }
    if (rc == 0 && st->iteration != it) {
      snprintf(err, errlen, "'%s' holds iteration %lld, expected %lld", path,
               (long long)st->iteration, (long long)it);
      rc = 1;
    }
  }
  if (agree(layout->world, rc)) {
    if (!err[0]) snprintf(err, errlen, "checkpoint load failed on another rank");
    return -1;
  }
  return 0;
}
