/* trainer/checkpoint.c — see checkpoint.h. */
#include "trainer/checkpoint.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/fileio.h"
#include "core/failpoint.h"
#include "core/util.h"
#include "trainer/checkpoint_buffers.h"
#include "trainer/dist_checkpoint.h"

#define CKPT_MAGIC "MTCKPT\0\1"
#define CKPT_VERSION 1u
enum { REC_PARAM = 0, REC_EXP_AVG = 1, REC_EXP_AVG_SQ = 2, REC_MASTER = 3 };
static const char *k_rec_names[] = {"param", "exp_avg", "exp_avg_sq", "master"};

/* ---------- growable byte buffer ---------- */
typedef struct {
  unsigned char *p;
  size_t n, cap;
} buf_t;

static void buf_put(buf_t *b, const void *src, size_t n) {
  if (b->n + n > b->cap) {
    b->cap = (b->n + n) * 2 + 4096;
    b->p = mt_xrealloc(b->p, b->cap);
  }
  memcpy(b->p + b->n, src, n);
  b->n += n;
}
#define PUT(b, v) buf_put((b), &(v), sizeof(v))

static void mp_dir_name(char *out, size_t n, const mt_ckpt_layout *L) {
  if (L->pp_size > 1) snprintf(out, n, "mp_rank_%02d_%03d", L->tp_rank, L->pp_rank);
  else snprintf(out, n, "mp_rank_%02d", L->tp_rank);
}

/* Fault injection for the crash-during-save test: with
 * MEGATRAIN_FAILPOINT=checkpoint_write:N the process writes half of its
 * checkpoint file of iteration N and then kills itself with SIGKILL. */
static int failpoint_hit(int64_t iteration) {
  return mt_failpoint_at("checkpoint_write", iteration);
}

static int rm_rf(const char *path) {
  DIR *d = opendir(path);
  if (!d) return unlink(path);
  struct dirent *e;
  char sub[4096];
  while ((e = readdir(d))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
    rm_rf(sub);
  }
  closedir(d);
  return rmdir(path);
}

/* Serialise this rank's state into b (without the CRC trailer). */
static void serialise(buf_t *b, const mt_ckpt_state *st, const mt_adamw *opt,
                      const mt_ckpt_layout *L) {
  mt_backend *be = opt->be;
  const mt_param_list *pl = opt->params;
  int has_master = opt->master != opt->param_buf;
  uint32_t version = CKPT_VERSION,
           nrec = (uint32_t)pl->n * (has_master ? 4u : 3u) + (uint32_t)L->n_buffers;
  buf_put(b, CKPT_MAGIC, 8);
  PUT(b, version);
  PUT(b, nrec);
  PUT(b, st->iteration);
  PUT(b, st->consumed_samples);
  PUT(b, opt->step);
  PUT(b, st->skipped_iters);
  PUT(b, st->nan_iters);
  PUT(b, st->seed);
  size_t es = mt_dtype_size(be->dtype);
  for (uint32_t kind = 0; kind < (has_master ? 4u : 3u); kind++) {
    for (int i = 0; i < pl->n; i++) {
      const mt_param *p = &pl->p[i];
      uint32_t name_len = (uint32_t)strlen(p->name);
      uint32_t dtype = kind == REC_PARAM ? (uint32_t)be->dtype : (uint32_t)MT_F32;
      size_t el = kind == REC_PARAM ? es : sizeof(float);
      uint64_t nbytes = (uint64_t)p->numel * el;
      PUT(b, name_len);
      buf_put(b, p->name, name_len);
      PUT(b, kind);
      PUT(b, dtype);
      int64_t shape[6] = {p->rows, p->cols, p->local_rows, p->local_cols, p->row_offset,
                          p->col_offset};
      buf_put(b, shape, sizeof shape);
      PUT(b, nbytes);
      const void *src;
      switch (kind) {
        case REC_PARAM: src = (const char *)opt->param_buf + (size_t)p->offset * es; break;
        case REC_EXP_AVG: src = opt->m + p->offset; break;
        case REC_EXP_AVG_SQ: src = opt->v + p->offset; break;
        default: src = opt->master + p->offset; break;
      }
      if (b->n + nbytes > b->cap) {
        b->cap = (b->n + nbytes) * 2 + 4096;
        b->p = mt_xrealloc(b->p, b->cap);
      }
      be->ops->memcpy_d2h(be, b->p + b->n, src, nbytes);
      b->n += nbytes;
    }
  }
  size_t nb = 0; /* buffer records (expert biases) after the parameters */
  unsigned char *recs = mt_ckpt_buffers_serialise(L, &nb);
  buf_put(b, recs, nb);
  free(recs);
}

/* Agree on a status over all ranks: returns the max of the local values. */
static int agree(mt_group *world, int local) {
  int32_t v = local;
  if (world) mt_allreduce(world, &v, 1, MT_I32, MT_OP_MAX);
  return v;
}

int mt_checkpoint_save(const char *save_dir, const mt_ckpt_state *st, const char *config_json,
                       const mt_adamw *opt, const mt_ckpt_layout *layout, char *err,
                       size_t errlen) {
  char final_dir[4096], tmp_dir[4200], mp[64], path[4400];
  snprintf(final_dir, sizeof final_dir, "%s/iter_%07lld", save_dir, (long long)st->iteration);
  snprintf(tmp_dir, sizeof tmp_dir, "%s.tmp", final_dir);
  mp_dir_name(mp, sizeof mp, layout);
  int is_root = !layout->world || mt_group_rank(layout->world) == 0;
  int rc = 0;
  err[0] = '\0';
  if (is_root) {
    rm_rf(tmp_dir); /* leftovers of a crashed save */
    if (mt_mkdirs(tmp_dir) != 0) {
      snprintf(err, errlen, "cannot create checkpoint directory '%s': %s", tmp_dir,
               strerror(errno));
      rc = 1;
    }
  }
  if (agree(layout->world, rc)) {
    if (!err[0]) snprintf(err, errlen, "checkpoint save failed on another rank");
    return -1;
  }
  uint32_t crc = 0;
  if (layout->shard_save) {
    snprintf(path, sizeof path, "%s/%s", tmp_dir, mp);
    if (mt_mkdirs(path) != 0) {
      snprintf(err, errlen, "cannot create '%s': %s", path, strerror(errno));
      rc = 1;
    } else {
      rc = layout->shard_save(layout->shard_ctx, st, path, err, errlen) ? 1 : 0;
      if (!rc && layout->writer && layout->n_buffers > 0) {
        char bpath[4500];
        snprintf(bpath, sizeof bpath, "%s/model_buffers.bin", path);
        rc = mt_ckpt_buffers_save_file(bpath, layout, err, errlen) ? 1 : 0;
      }
      mt_fsync_dir(path);
    }
  } else if (layout->writer) {
    buf_t b = {0};
    serialise(&b, st, opt, layout);
    crc = mt_crc32(0, b.p, b.n);
    buf_put(&b, &crc, sizeof crc);
    snprintf(path, sizeof path, "%s/%s", tmp_dir, mp);
    if (mt_mkdirs(path) != 0) {
      snprintf(err, errlen, "cannot create '%s': %s", path, strerror(errno));
      rc = 1;
    } else {
      snprintf(path, sizeof path, "%s/%s/model_optim_rng.bin", tmp_dir, mp);
      if (failpoint_hit(st->iteration)) {
        mt_write_file_synced(path, b.p, b.n / 2, err, errlen);
        raise(SIGKILL);
      }
      rc = mt_write_file_synced(path, b.p, b.n, err, errlen) ? 1 : 0;
      snprintf(path, sizeof path, "%s/%s", tmp_dir, mp);
      mt_fsync_dir(path);
    }
    free(b.p);
  }
  if (agree(layout->world, rc)) {
    if (!err[0]) snprintf(err, errlen, "checkpoint save failed on another rank");
    return -1;
  }
  if (is_root) {
    /* metadata.json, then atomically publish the directory and "latest" */
    const char *cj = config_json ? config_json : "null";
    size_t mcap = strlen(cj) + 160; /* the fixed text and three numbers fit in 160 */
    char *meta = mt_xmalloc(mcap);
    int mlen = snprintf(meta, mcap,
                        "{\"iteration\": %lld, \"consumed_samples\": %lld, \"format\": "
                        "\"megatrain-v%u\", \"config\": %s}\n",
                        (long long)st->iteration, (long long)st->consumed_samples, CKPT_VERSION,
                        cj);
    snprintf(path, sizeof path, "%s/metadata.json", tmp_dir);
    rc = mt_write_file_synced(path, meta, (size_t)mlen, err, errlen) ? 1 : 0;
    free(meta);
    if (!rc) {
      mt_fsync_dir(tmp_dir);
      char old_dir[4300];
      snprintf(old_dir, sizeof old_dir, "%s.old", final_dir);
      rm_rf(old_dir);
      if (access(final_dir, F_OK) == 0) rename(final_dir, old_dir);
      if (rename(tmp_dir, final_dir) != 0) {
        snprintf(err, errlen, "cannot rename '%s' to '%s': %s", tmp_dir, final_dir,
                 strerror(errno));
        rc = 1;
      } else {
        rm_rf(old_dir);
        mt_fsync_dir(save_dir);
        char latest[4400], latest_tmp[4500], num[32];
        snprintf(latest, sizeof latest, "%s/latest_checkpointed_iteration.txt", save_dir);
        snprintf(latest_tmp, sizeof latest_tmp, "%s.tmp", latest);
        int n = snprintf(num, sizeof num, "%lld\n", (long long)st->iteration);
        if (mt_write_file_synced(latest_tmp, num, (size_t)n, err, errlen) != 0 ||
            rename(latest_tmp, latest) != 0) {
          if (!err[0]) snprintf(err, errlen, "cannot update '%s': %s", latest, strerror(errno));
          rc = 1;
        }
        mt_fsync_dir(save_dir);
      }
    }
  }
  if (agree(layout->world, rc)) {
    if (!err[0]) snprintf(err, errlen, "checkpoint save failed on rank 0");
    return -1;
  }
  return 0;
}

int64_t mt_checkpoint_latest(const char *dir) { return mt_dckpt_latest(dir); }

int mt_ckpt_write_with_crc(const char *path, const void *data, size_t n, char *err,
                           size_t errlen) {
  buf_t b = {0};
  buf_put(&b, data, n);
  uint32_t crc = mt_crc32(0, data, n);
  PUT(&b, crc);
  int rc = mt_write_file_synced(path, b.p, b.n, err, errlen);
  free(b.p);
  return rc;
}

/* Whole checkpoint file (core/fileio.h) with the checkpoint reader's messages. */
static unsigned char *read_whole(const char *path, size_t *n, char *err, size_t errlen) {
  int e = 0;
  unsigned char *p = (unsigned char *)mt_read_file(path, 0, n, &e);
  if (!p) {
    if (e == EIO) snprintf(err, errlen, "short read on '%s'", path);
    else snprintf(err, errlen, "cannot open checkpoint file '%s': %s", path, strerror(e));
  }
  return p;
}

void *mt_ckpt_read_with_crc(const char *path, size_t *n, char *err, size_t errlen) {
  size_t len = 0;
  unsigned char *p = read_whole(path, &len, err, errlen);
  if (!p) return NULL;
  uint32_t stored;
  if (len < 4) goto bad;
  memcpy(&stored, p + len - 4, 4);
  if (mt_crc32(0, p, len - 4) != stored) goto bad;
  *n = len - 4;
  return p;
bad:
  free(p);
  snprintf(err, errlen, "checksum mismatch in '%s' (file corrupt or truncated)", path);
  return NULL;
}

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
  unsigned char *data = read_whole(path, &n, err, errlen);
  if (!data) return -1;
  int rc = -1;
  if (n < 8 + 4 + 4 || memcmp(data, CKPT_MAGIC, 8) != 0) {
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
  if (version != CKPT_VERSION) {
    snprintf(err, errlen, "'%s' has format version %u, this megatrain reads %u", path, version,
             CKPT_VERSION);
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
      size_t el = kind == REC_PARAM ? mt_dtype_size(be->dtype) : sizeof(float);
      if ((kind == REC_PARAM && dtype != (uint32_t)be->dtype) ||
          nbytes != (uint64_t)p->numel * el) {
        snprintf(err, errlen, "checkpoint tensor '%s' (%s) has dtype/size that does not match",
                 name, k_rec_names[kind]);
        goto out;
      }
      if (pass == 1) {
        void *dst = NULL;
        switch (kind) {
          case REC_PARAM: dst = (char *)opt->param_buf + (size_t)p->offset * el; break;
          case REC_EXP_AVG: dst = opt->m + p->offset; break;
          case REC_EXP_AVG_SQ: dst = opt->v + p->offset; break;
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
    mp_dir_name(mp, sizeof mp, layout);
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
