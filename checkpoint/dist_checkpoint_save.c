/* checkpoint/dist_checkpoint_save.c — mt_dckpt_save: every rank streams its
 * write-views into its own shard file (staged to the host in bounded chunks,
 * CRC-32 per 1 MiB block), the piece descriptors are gathered to rank 0,
 * which checks that every tensor is covered exactly once, writes index.bin
 * and metadata.json and publishes the directory and "latest" atomically.
 * Errors are agreed over the world at each stage (every rank returns the
 * same status and message). Fault injection for the crash test:
 * MEGATRAIN_FAILPOINT=checkpoint_write:N writes half of this rank's shard
 * file of iteration N and then raises SIGKILL; checkpoint_latest_enospc:N
 * makes the write of "latest" after iteration N is published fail with
 * ENOSPC. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/fileio.h"
#include "core/failpoint.h"
#include "core/util.h"
#include "checkpoint/dist_checkpoint_internal.h"

int mt_dckpt_rm_rf(const char *path) {
  DIR *d = opendir(path);
  if (!d) return unlink(path);
  struct dirent *e;
  char sub[4400];
  while ((e = readdir(d))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
    mt_dckpt_rm_rf(sub);
  }
  closedir(d);
  return rmdir(path);
}

static int failpoint_hit(int64_t iteration) {
  return mt_failpoint_at("checkpoint_write", iteration);
}

/* Agree on failure over the world: every rank gets the message and the code
 * (-1, or MT_DCKPT_UNREFERENCED) of the lowest failing rank. `code` is this
 * rank's (0: no failure). Returns 0 when no rank failed, else the code. */
static int agree_code(mt_group *world, int code, char *err, size_t errlen) {
  if (!world) return code;
  int32_t who = code ? mt_group_size(world) - mt_group_rank(world) : 0; /* max = lowest rank */
  mt_allreduce(world, &who, 1, MT_I32, MT_OP_MAX);
  if (!who) return 0;
  int root = mt_group_size(world) - who;
  int32_t msg[513]; /* 2048 bytes of message (as the trainer's, train_checkpoint.c), the code */
  memset(msg, 0, sizeof msg);
  if (mt_group_rank(world) == root) {
    snprintf((char *)msg, 2048, "%s", err);
    msg[512] = code;
  }
  mt_broadcast(world, msg, 513, MT_I32, root);
  ((char *)msg)[2047] = '\0';
  if (mt_group_rank(world) != root) snprintf(err, errlen, "%s", (const char *)msg);
  return msg[512];
}

static int agree(mt_group *world, int failed, char *err, size_t errlen) {
  return agree_code(world, failed ? -1 : 0, err, errlen) != 0;
}

/* Writes with an optional byte limit (the failpoint). */
typedef struct {
  int fd;
  int64_t pos, limit; /* limit < 0: none */
  const char *path;
  int64_t limit_inject; /* failpoint: the first write past this offset fails ... */
  int inject;           /* ... with this errno (0: none) */
} writer;

static int wr(writer *w, const void *p, int64_t n, char *err, size_t errlen) {
  if (w->limit >= 0 && w->pos + n > w->limit) n = w->limit - w->pos;
  const char *s = p;
  while (n > 0) {
    ssize_t k;
    if (w->inject && w->pos + n > w->limit_inject) {
      k = -1;
      errno = w->inject; /* failpoint checkpoint_enospc / checkpoint_eio */
    } else {
      k = write(w->fd, s, (size_t)n);
    }
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) {
      snprintf(err, errlen, "write to '%s' failed: %s", w->path, strerror(errno));
      return -1;
    }
    s += k;
    n -= k;
    w->pos += k;
  }
  return 0;
}

/* Write this rank's shard file (when it has pieces) and describe its pieces
 * and tensors in d: i64 file_bytes, then records {u32 kind (0 tensor seen,
 * 1 piece), u32 name_len, name, i64 rows, cols, i32 dtype[, i64 offset,
 * nbytes, r0 c0 nr nc lo hi, i32 n_blocks, u32 crc[]]}. */
static int write_shard(const char *path, int rank, int64_t iteration, mt_backend *be,
                       const mt_dckpt_view *views, int n_views, mt_dckpt_buf *d, char *err,
                       size_t errlen) {
  int64_t *off = mt_xcalloc((size_t)(n_views ? n_views : 1), sizeof *off);
  int64_t pos = MT_DCKPT_SHARD_HEADER;
  for (int i = 0; i < n_views; i++) {
    const mt_dckpt_view *v = &views[i];
    if (!v->write || v->hi <= v->lo) continue;
    off[i] = pos;
    pos = mt_round_up(pos + (v->hi - v->lo) * (int64_t)mt_dtype_size(v->dtype), 8);
  }
  int64_t file_bytes = pos > MT_DCKPT_SHARD_HEADER ? pos : 0;
  MT_DCKPT_PUT(d, file_bytes);
  writer w = {-1, 0, -1, path, 0, 0};
  int rc = 0;
  unsigned char *stage = NULL;
  if (file_bytes) {
    w.fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (w.fd < 0) {
      snprintf(err, errlen, "cannot create '%s': %s", path, strerror(errno));
      free(off);
      return -1;
    }
    if (failpoint_hit(iteration)) w.limit = file_bytes / 2;
    w.limit_inject = file_bytes / 2;
    if (mt_failpoint_at("checkpoint_enospc", iteration)) w.inject = ENOSPC;
    if (mt_failpoint_at("checkpoint_eio", iteration)) w.inject = EIO;
    unsigned char hdr[MT_DCKPT_SHARD_HEADER] = {0};
    uint32_t version = MT_DCKPT_VERSION, r32 = (uint32_t)rank;
    memcpy(hdr, MT_DCKPT_SHARD_MAGIC, 8);
    memcpy(hdr + 8, &version, 4);
    memcpy(hdr + 12, &r32, 4);
    memcpy(hdr + 16, &iteration, 8);
    rc = wr(&w, hdr, sizeof hdr, err, errlen);
  }
  static const unsigned char zeros[8] = {0};
  for (int i = 0; i < n_views && !rc; i++) {
    const mt_dckpt_view *v = &views[i];
    uint32_t kind = v->write && v->hi > v->lo, len = (uint32_t)strlen(v->name);
    int32_t dt = (int32_t)v->dtype;
    MT_DCKPT_PUT(d, kind);
    MT_DCKPT_PUT(d, len);
    mt_dckpt_buf_put(d, v->name, len);
    MT_DCKPT_PUT(d, v->rows);
    MT_DCKPT_PUT(d, v->cols);
    MT_DCKPT_PUT(d, dt);
    if (!kind) continue;
    size_t es = mt_dtype_size(v->dtype);
    int64_t nbytes = (v->hi - v->lo) * (int64_t)es;
    int32_t nb = (int32_t)((nbytes + MT_DCKPT_BLOCK - 1) / MT_DCKPT_BLOCK);
    MT_DCKPT_PUT(d, off[i]);
    MT_DCKPT_PUT(d, nbytes);
    mt_dckpt_buf_put(d, &v->r0, 4 * sizeof(int64_t));
    MT_DCKPT_PUT(d, v->lo);
    MT_DCKPT_PUT(d, v->hi);
    MT_DCKPT_PUT(d, nb);
    if (w.pos < off[i]) rc = wr(&w, zeros, off[i] - w.pos, err, errlen); /* 8-alignment */
    int device = be && !v->host;
    if (device && !stage) stage = mt_xmalloc((size_t)MT_DCKPT_CHUNK);
    for (int64_t b = 0; b < nbytes && !rc; b += MT_DCKPT_CHUNK) {
      int64_t n = nbytes - b < MT_DCKPT_CHUNK ? nbytes - b : MT_DCKPT_CHUNK;
      const unsigned char *src = (const unsigned char *)v->data + b;
      if (device) {
        be->ops->memcpy_d2h(be, stage, src, (size_t)n);
        src = stage;
      }
      for (int64_t k = 0; k < n; k += MT_DCKPT_BLOCK) {
        uint32_t crc = mt_crc32(0, src + k, (size_t)(n - k < MT_DCKPT_BLOCK ? n - k
                                                                            : MT_DCKPT_BLOCK));
        MT_DCKPT_PUT(d, crc);
      }
      rc = wr(&w, src, n, err, errlen);
    }
  }
  if (!rc && file_bytes && w.pos < file_bytes) rc = wr(&w, zeros, file_bytes - w.pos, err, errlen);
  if (w.fd >= 0) {
    if (!rc && fsync(w.fd) != 0) {
      snprintf(err, errlen, "fsync of '%s' failed: %s", path, strerror(errno));
      rc = -1;
    }
    if (w.limit >= 0) raise(SIGKILL); /* failpoint: half the file is on disk */
    if (close(w.fd) != 0 && !rc) {
      snprintf(err, errlen, "close of '%s' failed: %s", path, strerror(errno));
      rc = -1;
    }
  }
  free(stage);
  free(off);
  return rc;
}

typedef struct {
  const unsigned char *p;
  size_t n, off;
} rd_t;

static void get(rd_t *r, void *dst, size_t n) {
  MT_ASSERT(r->n - r->off >= n); /* produced by write_shard of this build */
  memcpy(dst, r->p + r->off, n);
  r->off += n;
}
#define GET(r, v) get((r), &(v), sizeof(v))

/* Rank 0: the index from every rank's descriptors. */
static int build_index(mt_dckpt_index *ix, const unsigned char *all, const int64_t *counts,
                       const int64_t *displs, int n_ranks, char *err, size_t errlen) {
  for (int r = 0; r < n_ranks; r++) {
    rd_t rd = {all + displs[r] * 8, (size_t)counts[r] * 8, 0};
    int64_t file_bytes;
    GET(&rd, file_bytes);
    int32_t file = -1;
    if (file_bytes) {
      ix->f = mt_xrealloc(ix->f, (size_t)(ix->n_f + 1) * sizeof *ix->f);
      ix->f[ix->n_f] = (mt_dckpt_file){r, file_bytes};
      file = ix->n_f++;
    }
    while (rd.n - rd.off >= 8) {
      uint32_t kind, len;
      char name[MT_DCKPT_NAME_MAX];
      int64_t rows, cols;
      int32_t dt;
      GET(&rd, kind);
      GET(&rd, len);
      if (len >= MT_DCKPT_NAME_MAX) {
        snprintf(err, errlen, "a tensor name of rank %d is longer than %d bytes", r,
                 MT_DCKPT_NAME_MAX - 1);
        return -1;
      }
      get(&rd, name, len);
      name[len] = '\0';
      GET(&rd, rows);
      GET(&rd, cols);
      GET(&rd, dt);
      int t = mt_dckpt_index_tensor(ix, name, rows, cols, kind ? dt : -1, err, errlen);
      if (t < 0) return -1;
      if (!kind) continue;
      if (ix->n_p % 1024 == 0) ix->p = mt_xrealloc(ix->p, (size_t)(ix->n_p + 1024) * sizeof *ix->p);
      mt_dckpt_piece *p = &ix->p[ix->n_p++];
      memset(p, 0, sizeof *p);
      p->tensor = t;
      p->file = file;
      GET(&rd, p->offset);
      GET(&rd, p->nbytes);
      get(&rd, &p->r0, 6 * sizeof(int64_t));
      GET(&rd, p->n_blocks);
      p->crc = mt_xmalloc((size_t)(p->n_blocks ? p->n_blocks : 1) * sizeof(uint32_t));
      get(&rd, p->crc, (size_t)p->n_blocks * sizeof(uint32_t));
    }
  }
  mt_dckpt_index_finish(ix);
  return 0;
}

/* Rank 0: write index.bin and metadata.json into tmp, publish tmp as final
 * and update "latest". Returns 0; -1 with a message when nothing was
 * published; MT_DCKPT_UNREFERENCED when final is complete on disk but
 * "latest" could not be updated (the message names both paths, the error and
 * the iteration "latest" still names, read back). */
static int publish(const char *save_dir, const char *tmp, const char *final,
                   const mt_dckpt_meta *meta, const char *config_json, const mt_dckpt_index *ix,
                   char *err, size_t errlen) {
  char path[4600];
  size_t n;
  char *mj = mt_dckpt_meta_json(meta, config_json, ix);
  mt_dckpt_index sealed = *ix; /* index.bin records metadata.json's CRC */
  sealed.meta_crc = mt_crc32(0, mj, strlen(mj));
  unsigned char *idx = mt_dckpt_index_encode(&sealed, &n);
  snprintf(path, sizeof path, "%s/index.bin", tmp);
  int rc = mt_write_file_synced(path, idx, n, err, errlen);
  free(idx);
  snprintf(path, sizeof path, "%s/metadata.json", tmp);
  if (!rc) rc = mt_write_file_synced(path, mj, strlen(mj), err, errlen);
  free(mj);
  if (rc) return -1;
  mt_fsync_dir(tmp);
  /* At every instant the iteration named by "latest" stays loadable: when
   * final exists (the same iteration saved again) it becomes final.old, and
   * mt_dckpt_open reads final.old while final is missing; final.old is
   * deleted only once the new final and "latest" are in place. */
  char old[4400];
  snprintf(old, sizeof old, "%s.old", final);
  if (access(final, F_OK) != 0 && access(old, F_OK) == 0 && rename(old, final) != 0) {
    /* a crash between the two renames below left the only copy in .old */
    snprintf(err, errlen, "cannot rename '%s' to '%s': %s", old, final, strerror(errno));
    return -1;
  }
  if (access(final, F_OK) == 0) {
    mt_dckpt_rm_rf(old); /* a leftover: final is the copy "latest" may name */
    if (rename(final, old) != 0) {
      snprintf(err, errlen, "cannot rename '%s' to '%s': %s", final, old, strerror(errno));
      return -1;
    }
  }
  if (rename(tmp, final) != 0) {
    snprintf(err, errlen, "cannot rename '%s' to '%s': %s", tmp, final, strerror(errno));
    if (access(old, F_OK) == 0) rename(old, final);
    return -1;
  }
  mt_fsync_dir(save_dir);
  /* the iteration is complete on disk; only "latest" remains */
  char latest[4400], latest_tmp[4500], num[32];
  snprintf(latest, sizeof latest, "%s/latest_checkpointed_iteration.txt", save_dir);
  snprintf(latest_tmp, sizeof latest_tmp, "%s.tmp", latest);
  int k = snprintf(num, sizeof num, "%" PRId64 "\n", meta->iteration);
  char why[9200];
  int bad = 0;
  if (mt_failpoint_at("checkpoint_latest_enospc", meta->iteration)) {
    /* failpoint: the disk fills while "latest" is written (what
     * mt_write_file_synced reports then) */
    int fd = open(latest_tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) close(fd);
    snprintf(why, sizeof why, "write to '%s' failed: %s", latest_tmp, strerror(ENOSPC));
    bad = 1;
  } else if (mt_write_file_synced(latest_tmp, num, (size_t)k, why, sizeof why) != 0) {
    bad = 1;
  } else if (rename(latest_tmp, latest) != 0) {
    snprintf(why, sizeof why, "cannot rename '%s' to '%s': %s", latest_tmp, latest,
             strerror(errno));
    bad = 1;
  }
  if (bad) {
    unlink(latest_tmp);
    /* say what is on disk, as read now: the complete iteration, and what
     * "latest" names */
    const int64_t named = mt_dckpt_latest(save_dir);
    char still[200];
    if (named >= 0)
      snprintf(still, sizeof still, "it still names iteration %" PRId64
               ", so a resume from this directory starts at iteration %" PRId64, named, named);
    else
      snprintf(still, sizeof still, "there is none, so a resume from this directory finds no "
               "checkpoint");
    snprintf(err, errlen,
             "iteration %" PRId64 " is saved completely in '%s', but '%s' was not updated (%s); "
             "%s (write %" PRId64 " into '%s' to resume from iteration %" PRId64 ")",
             meta->iteration, final, latest, why, still, meta->iteration, latest,
             meta->iteration);
    return MT_DCKPT_UNREFERENCED;
  }
  mt_fsync_dir(save_dir);
  mt_dckpt_rm_rf(old);
  return 0;
}

struct mt_dckpt_pending {
  char save_dir[4096], final[4200], tmp[4500];
  mt_dckpt_meta meta;
  char *config_json;
  int failed;       /* of the write phase */
  char err[5000];   /* its message */
  mt_dckpt_buf d;          /* this rank's piece descriptors */
  mt_dckpt_guard_fn guard; /* rank 0, before publishing (NULL: none) */
  void *guard_ctx;
};

/* The checked views of a save; 0 or -1 with a message. */
static int check_views(const mt_dckpt_view *views, int n_views, char *err, size_t errlen) {
  for (int i = 0; i < n_views; i++) {
    const mt_dckpt_view *v = &views[i];
    if (v->nr < 0 || v->nc < 0 || v->r0 < 0 || v->c0 < 0 || v->r0 + v->nr > v->rows ||
        v->c0 + v->nc > v->cols || v->lo < 0 || v->lo > v->hi || v->hi > v->nr * v->nc ||
        !(v->dtype == MT_F32 || v->dtype == MT_BF16 || v->dtype == MT_I64) ||
        strlen(v->name) >= MT_DCKPT_NAME_MAX || (v->hi > v->lo && !v->data)) {
      snprintf(err, errlen,
               "checkpoint save: view of tensor '%s' [%" PRId64 ", %" PRId64
               "] is invalid (box at %" PRId64 ",%" PRId64 " of %" PRId64 "x%" PRId64
               ", elements %" PRId64 "..%" PRId64 ", dtype %s)",
               v->name, v->rows, v->cols, v->r0, v->c0, v->nr, v->nc, v->lo, v->hi,
               mt_dtype_name(v->dtype));
      return -1;
    }
  }
  return 0;
}

int64_t mt_dckpt_pending_iteration(const mt_dckpt_pending *p) { return p->meta.iteration; }

void mt_dckpt_save_set_guard(mt_dckpt_pending *p, mt_dckpt_guard_fn fn, void *ctx) {
  p->guard = fn;
  p->guard_ctx = ctx;
}

void mt_dckpt_save_abandon(mt_dckpt_pending *p) {
  if (!p) return;
  free(p->config_json);
  free(p->d.p);
  free(p);
}

int mt_dckpt_save_begin(const char *save_dir, const mt_dckpt_meta *meta, const char *config_json,
                        const mt_dckpt_view *views, int n_views, mt_group *world,
                        mt_dckpt_pending **out, char *err, size_t errlen) {
  *out = NULL;
  mt_dckpt_pending *p = mt_xcalloc(1, sizeof *p);
  snprintf(p->save_dir, sizeof p->save_dir, "%s", save_dir);
  snprintf(p->final, sizeof p->final, "%s/iter_%07" PRId64, save_dir, meta->iteration);
  p->meta = *meta;
  if (config_json) {
    p->config_json = mt_xmalloc(strlen(config_json) + 1);
    strcpy(p->config_json, config_json);
  }
  const int rank = world ? mt_group_rank(world) : 0;
  int failed = 0;
  err[0] = '\0';
  /* the temporary directory is unique to the writing run (rank 0's host and
   * pid, broadcast): another run's leftovers are never ours to delete */
  int32_t name[64]; /* 256 bytes */
  memset(name, 0, sizeof name);
  if (rank == 0) {
    char host[128] = "host";
    gethostname(host, sizeof host - 1);
    host[sizeof host - 1] = '\0';
    for (char *c = host; *c; c++)
      if (*c == '/' || *c == ' ') *c = '_';
    snprintf((char *)name, sizeof name, "%.100s.%ld", host, (long)getpid());
  }
  if (world) mt_broadcast(world, name, 64, MT_I32, 0);
  ((char *)name)[sizeof name - 1] = '\0';
  snprintf(p->tmp, sizeof p->tmp, "%s.tmp.%s", p->final, (const char *)name);
  if (rank == 0) {
    mt_dckpt_rm_rf(p->tmp); /* this process's own earlier attempt */
    if (mt_mkdirs(p->tmp) != 0) {
      snprintf(err, errlen, "cannot create checkpoint directory '%s': %s", p->tmp,
               strerror(errno));
      failed = 1;
    }
  }
  if (!failed) failed = check_views(views, n_views, err, errlen) != 0;
  if (agree(world, failed, err, errlen)) {
    if (rank == 0) mt_dckpt_rm_rf(p->tmp);
    mt_dckpt_save_abandon(p);
    return -1;
  }
  *out = p;
  return 0;
}

int mt_dckpt_save_write(mt_dckpt_pending *p, int rank, mt_backend *be, const mt_dckpt_view *views,
                        int n_views) {
  int64_t a[MT_FAILPOINT_MAX_ARGS];
  if (mt_failpoint_get("checkpoint_stall", a) >= 1 && a[0] == p->meta.iteration)
    sleep(60); /* failpoint: a slow writer (the kill -9 test of asynchronous saves) */
  char path[4600];
  snprintf(path, sizeof path, "%s/shard_%05d.bin", p->tmp, rank);
  p->failed = write_shard(path, rank, p->meta.iteration, be, views, n_views, &p->d, p->err,
                          sizeof p->err) != 0;
  return p->failed ? -1 : 0;
}

int mt_dckpt_save_finish(mt_dckpt_pending *p, mt_group *world, char *err, size_t errlen) {
  const int rank = world ? mt_group_rank(world) : 0, n_ranks = world ? mt_group_size(world) : 1;
  snprintf(err, errlen, "%s", p->failed ? p->err : "");
  if (agree(world, p->failed, err, errlen)) {
    if (rank == 0) mt_dckpt_rm_rf(p->tmp);
    mt_dckpt_save_abandon(p);
    return -1;
  }
  mt_dckpt_buf d = p->d;
  p->d.p = NULL;
  /* gather the descriptors (as int64 words) */
  while (d.n % 8) mt_dckpt_buf_put(&d, "", 1);
  int64_t mine = (int64_t)(d.n / 8);
  int64_t *counts = mt_xmalloc((size_t)n_ranks * sizeof *counts);
  int64_t *displs = mt_xmalloc((size_t)n_ranks * sizeof *displs);
  unsigned char *all;
  if (world) {
    mt_allgather(world, &mine, counts, 1, MT_I64);
    int64_t total = 0;
    for (int r = 0; r < n_ranks; r++) {
      displs[r] = total;
      total += counts[r];
    }
    all = mt_xmalloc((size_t)(total ? total : 1) * 8);
    mt_allgatherv(world, d.p, mine, all, counts, displs, MT_I64);
    free(d.p);
  } else {
    counts[0] = mine;
    displs[0] = 0;
    all = d.p;
  }
  int code = 0; /* -1: nothing published; MT_DCKPT_UNREFERENCED: "latest" not updated */
  if (rank == 0) {
    mt_dckpt_index ix = {0};
    char where[4300];
    snprintf(where, sizeof where, "checkpoint save '%s'", p->final);
    if (build_index(&ix, all, counts, displs, n_ranks, err, errlen) != 0 ||
        mt_dckpt_index_validate(&ix, where, err, errlen) != 0 ||
        (p->guard && p->guard(p->guard_ctx, err, errlen) != 0))
      code = -1;
    else
      code = publish(p->save_dir, p->tmp, p->final, &p->meta, p->config_json, &ix, err, errlen);
    mt_dckpt_index_free(&ix);
    if (code == -1) mt_dckpt_rm_rf(p->tmp);
  }
  free(all);
  free(counts);
  free(displs);
  mt_dckpt_save_abandon(p);
  return agree_code(world, code, err, errlen);
}

int mt_dckpt_save(const char *save_dir, const mt_dckpt_meta *meta, const char *config_json,
                  mt_backend *be, const mt_dckpt_view *views, int n_views, mt_group *world,
                  char *err, size_t errlen) {
  mt_dckpt_pending *p;
  if (mt_dckpt_save_begin(save_dir, meta, config_json, views, n_views, world, &p, err, errlen))
    return -1;
  mt_dckpt_save_write(p, world ? mt_group_rank(world) : 0, be, views, n_views);
  return mt_dckpt_save_finish(p, world, err, errlen);
}
