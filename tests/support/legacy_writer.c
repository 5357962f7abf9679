/* tests/support/legacy_writer.c — writes checkpoints of the previous,
 * per-layout format (checkpoint/legacy_format.h) for the tests of its
 * readers and of `convert --upgrade` (see legacy_writer.h). Test code: not
 * part of the megatrain library. */
#include "tests/support/legacy_writer.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoint/legacy_records.h"
#include "core/failpoint.h"
#include "core/fileio.h"
#include "core/util.h"

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

static size_t put(unsigned char *p, size_t off, const void *src, size_t n) {
  if (p) memcpy(p + off, src, n);
  return off + n;
}

/* Records of all buffers into p (NULL: only measure); returns the size. */
static size_t records(const mt_ckpt_layout *L, unsigned char *p) {
  size_t off = 0;
  for (int i = 0; i < L->n_buffers; i++) {
    const mt_ckpt_buffer *b = &L->buffers[i];
    uint32_t name_len = (uint32_t)strlen(b->name), kind = MT_CKPT_REC_BUFFER,
             dtype = (uint32_t)b->dtype;
    int64_t shape[6] = {b->numel, 1, b->numel, 1, 0, 0};
    uint64_t nbytes = (uint64_t)b->numel * mt_dtype_size(b->dtype);
    off = put(p, off, &name_len, 4);
    off = put(p, off, b->name, name_len);
    off = put(p, off, &kind, 4);
    off = put(p, off, &dtype, 4);
    off = put(p, off, shape, sizeof shape);
    off = put(p, off, &nbytes, 8);
    off = put(p, off, b->data, nbytes);
  }
  return off;
}

/* The records of L's buffers (malloc'ed, *n bytes; free()). */
static unsigned char *buffers_serialise(const mt_ckpt_layout *L, size_t *n) {
  *n = records(L, NULL);
  unsigned char *p = mt_xmalloc(*n + 1);
  records(L, p);
  return p;
}

/* Serialise this rank's state into b (without the CRC trailer). */
static void serialise(buf_t *b, const mt_ckpt_state *st, const mt_adamw *opt,
                      const mt_ckpt_layout *L) {
  mt_backend *be = opt->be;
  const mt_param_list *pl = opt->params;
  int has_master = opt->master != opt->param_buf;
  uint32_t version = MT_LEGACY_CKPT_VERSION,
           nrec = (uint32_t)pl->n * (has_master ? 4u : 3u) + (uint32_t)L->n_buffers;
  buf_put(b, MT_LEGACY_CKPT_MAGIC, 8);
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
      uint32_t dtype = kind == MT_CKPT_REC_PARAM ? (uint32_t)be->dtype : (uint32_t)MT_F32;
      size_t el = kind == MT_CKPT_REC_PARAM ? es : sizeof(float);
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
        case MT_CKPT_REC_PARAM: src = (const char *)opt->param_buf + (size_t)p->offset * es; break;
        case MT_CKPT_REC_EXP_AVG: src = opt->m + p->offset; break;
        case MT_CKPT_REC_EXP_AVG_SQ: src = opt->v + p->offset; break;
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
  unsigned char *recs = buffers_serialise(L, &nb);
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
  mt_ckpt_mp_dir_name(mp, sizeof mp, layout);
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
      if (mt_failpoint_at("checkpoint_write", st->iteration)) {
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
                        (long long)st->iteration, (long long)st->consumed_samples, MT_LEGACY_CKPT_VERSION,
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

int mt_ckpt_buffers_save_file(const char *path, const mt_ckpt_layout *L, char *err,
                              size_t errlen) {
  size_t n = records(L, NULL);
  unsigned char *p = mt_xmalloc(n + 12);
  uint32_t cnt = (uint32_t)L->n_buffers;
  memcpy(p, MT_LEGACY_BUFS_MAGIC, 8);
  memcpy(p + 8, &cnt, 4);
  records(L, p + 12);
  int rc = mt_ckpt_write_with_crc(path, p, n + 12, err, errlen);
  free(p);
  return rc;
}
