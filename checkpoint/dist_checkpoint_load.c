/* checkpoint/dist_checkpoint_load.c — opening a layout-free checkpoint
 * (metadata.json, index.bin, the shard files' presence and length, exact
 * coverage of every tensor) and filling views from it: all views are checked
 * first (tensor present, same global shape, convertible dtype), then each is
 * filled from the stored pieces that overlap it (dist_checkpoint_copy.c),
 * device views through a bounded host staging buffer. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/fileio.h"
#include "core/util.h"
#include "checkpoint/dist_checkpoint_internal.h"

int64_t mt_dckpt_latest(const char *dir) {
  char path[4200];
  snprintf(path, sizeof path, "%s/latest_checkpointed_iteration.txt", dir);
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  long long it = -1;
  if (fscanf(f, "%lld", &it) != 1) it = -1;
  fclose(f);
  return it;
}

/* 1 when dir holds an entry named mp_rank_* (the per-layout format). */
static int has_legacy(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return 0;
  struct dirent *e;
  int found = 0;
  while (!found && (e = readdir(d))) found = !strncmp(e->d_name, "mp_rank_", 8);
  closedir(d);
  return found;
}

static void shard_path(char *out, size_t n, const mt_dckpt *c, int file) {
  snprintf(out, n, "%s/shard_%05d.bin", c->dir, c->ix.f[file].rank);
}

/* Every shard file exists, is as long as the index says and starts with
 * the shard magic. */
static int check_files(const mt_dckpt *c, char *err, size_t errlen) {
  for (int i = 0; i < c->ix.n_f; i++) {
    char path[4200];
    shard_path(path, sizeof path, c, i);
    const char *tensor = "?";
    for (int k = 0; k < c->ix.n_p; k++)
      if (c->ix.p[k].file == i) {
        tensor = c->ix.t[c->ix.p[k].tensor].name;
        break;
      }
    struct stat st;
    if (stat(path, &st) != 0) {
      snprintf(err, errlen, "checkpoint file '%s' (pieces of tensor '%s' and others) is missing: %s",
               path, tensor, strerror(errno));
      return -1;
    }
    if ((int64_t)st.st_size < c->ix.f[i].bytes) {
      snprintf(err, errlen,
               "checkpoint file '%s' is truncated: %" PRId64 " bytes, the index says %" PRId64
               " (pieces of tensor '%s' and others)",
               path, (int64_t)st.st_size, c->ix.f[i].bytes, tensor);
      return -1;
    }
    char hdr[8] = {0};
    int fd = open(path, O_RDONLY);
    ssize_t k = fd >= 0 ? pread(fd, hdr, 8, 0) : -1;
    if (fd >= 0) close(fd);
    if (k != 8 || memcmp(hdr, MT_DCKPT_SHARD_MAGIC, 8) != 0) {
      snprintf(err, errlen, "checkpoint file '%s' is unreadable or not a megatrain shard file",
               path);
      return -1;
    }
  }
  for (int k = 0; k < c->ix.n_p; k++) { /* every piece inside its file */
    const mt_dckpt_piece *p = &c->ix.p[k];
    int64_t fb = c->ix.f[p->file].bytes; /* no overflow: offset >= 32 (decode) */
    if (p->nbytes < 0 || p->offset > fb || p->nbytes > fb - p->offset) {
      char path[4200];
      shard_path(path, sizeof path, c, p->file);
      snprintf(err, errlen, "'%s/index.bin': a piece of tensor '%s' ends past the end of '%s'",
               c->dir, c->ix.t[p->tensor].name, path);
      return -1;
    }
  }
  return 0;
}

/* 1 when path exists. */
static int exists(const char *dir, const char *name) {
  char path[4300];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  return access(path, F_OK) == 0;
}

/* The message for a load directory without latest_checkpointed_iteration.txt:
 * what is there instead, when it is recognizable. */
static void no_latest(const char *load_dir, char *err, size_t errlen) {
  struct stat st;
  char dir[4096];
  snprintf(dir, sizeof dir, "%s", load_dir);
  size_t l = strlen(dir);
  while (l > 1 && dir[l - 1] == '/') dir[--l] = '\0';
  const char *slash = strrchr(dir, '/');
  const char *base = slash ? slash + 1 : dir;
  size_t bl = strlen(base);
  int iter_name = bl >= 12 && !strncmp(base, "iter_", 5) && strspn(base + 5, "0123456789") >= 7;
  if (stat(load_dir, &st) != 0) {
    snprintf(err, errlen, "checkpoint directory '%s' does not exist", load_dir);
  } else if (iter_name || exists(load_dir, "index.bin") || exists(load_dir, "mp_rank_00")) {
    char parent[4096];
    if (slash == dir) snprintf(parent, sizeof parent, "/");
    else if (slash) snprintf(parent, sizeof parent, "%.*s", (int)(slash - dir), dir);
    else snprintf(parent, sizeof parent, ".");
    snprintf(err, errlen,
             "'%s' is an iteration directory of a checkpoint: pass its parent '%s' (the "
             "checkpoint.save directory)",
             load_dir, parent);
  } else if (exists(load_dir, "model.safetensors") ||
             exists(load_dir, "model.safetensors.index.json")) {
    snprintf(err, errlen,
             "'%s' holds a Hugging Face model (model.safetensors): import it with megatrain "
             "convert --from hf",
             load_dir);
  } else {
    snprintf(err, errlen,
             "no checkpoint in '%s': latest_checkpointed_iteration.txt is missing or unreadable",
             load_dir);
  }
}

int mt_dckpt_open(const char *load_dir, int64_t iteration, mt_dckpt **out, char *err,
                  size_t errlen) {
  *out = NULL;
  if (iteration < 0) {
    iteration = mt_dckpt_latest(load_dir);
    if (iteration < 0) {
      no_latest(load_dir, err, errlen);
      return -1;
    }
  }
  mt_dckpt *c = mt_xcalloc(1, sizeof *c);
  snprintf(c->dir, sizeof c->dir, "%s/iter_%07" PRId64, load_dir, iteration);
  struct stat dst;
  if (stat(c->dir, &dst) != 0) { /* a save of the same iteration stopped between its renames */
    char old[sizeof c->dir];
    size_t l = strlen(c->dir);
    if (l + 5 <= sizeof old) {
      memcpy(old, c->dir, l);
      memcpy(old + l, ".old", 5);
      if (stat(old, &dst) == 0) memcpy(c->dir, old, l + 5);
    }
  }
  char path[4300];
  snprintf(path, sizeof path, "%s/index.bin", c->dir);
  size_t n = 0;
  int e = 0;
  unsigned char *idx = (unsigned char *)mt_read_file(path, 0, &n, &e);
  if (!idx) {
    struct stat st;
    if (has_legacy(c->dir)) {
      free(c);
      return 1;
    }
    if (stat(c->dir, &st) != 0) snprintf(err, errlen, "checkpoint directory '%s' does not exist", c->dir);
    else snprintf(err, errlen, "cannot read '%s': %s", path, strerror(e));
    free(c);
    return -1;
  }
  int rc = mt_dckpt_index_decode(&c->ix, idx, n, path, err, errlen);
  free(idx);
  if (rc == 0) {
    snprintf(path, sizeof path, "%s/metadata.json", c->dir);
    char *text = mt_read_file(path, 0, &n, &e);
    if (!text) {
      snprintf(err, errlen, "cannot read '%s': %s", path, strerror(e));
      rc = -1;
    } else if (c->ix.has_meta_crc && mt_crc32(0, text, n) != c->ix.meta_crc) {
      snprintf(err, errlen, "checksum mismatch in '%s' (file corrupt or edited)", path);
      free(text);
      rc = -1;
    } else {
      rc = mt_dckpt_meta_parse(text, path, &c->meta, &c->config_json, err, errlen);
      free(text);
      if (rc == 0 && c->meta.iteration != iteration) {
        snprintf(err, errlen, "'%s' says iteration %" PRId64 ", its directory %" PRId64, path,
                 c->meta.iteration, iteration);
        rc = -1;
      }
      int we = rc == 0 ? mt_dckpt_index_find(&c->ix, "embedding.word_embeddings.weight") : -1;
      if (we >= 0 && c->ix.t[we].rows != c->meta.vocab_size) {
        snprintf(err, errlen,
                 "'%s' says vocab_size %" PRId64 " but tensor 'embedding.word_embeddings.weight' "
                 "has %" PRId64 " rows",
                 path, c->meta.vocab_size, c->ix.t[we].rows);
        rc = -1;
      }
    }
  }
  if (rc == 0) {
    snprintf(path, sizeof path, "%s/index.bin", c->dir);
    rc = check_files(c, err, errlen) || mt_dckpt_index_validate(&c->ix, path, err, errlen) ? -1 : 0;
  }
  if (rc) {
    mt_dckpt_close(c);
    return -1;
  }
  *out = c;
  return 0;
}

void mt_dckpt_close(mt_dckpt *c) {
  if (!c) return;
  mt_dckpt_index_free(&c->ix);
  free(c->config_json);
  free(c);
}

const mt_dckpt_meta *mt_dckpt_meta_of(const mt_dckpt *c) { return &c->meta; }
const char *mt_dckpt_config_json(const mt_dckpt *c) {
  return c->config_json ? c->config_json : "null";
}
const char *mt_dckpt_dir(const mt_dckpt *c) { return c->dir; }
int mt_dckpt_n_tensors(const mt_dckpt *c) { return c->ix.n_t; }
const char *mt_dckpt_tensor_name(const mt_dckpt *c, int i) { return c->ix.t[i].name; }
void mt_dckpt_tensor_shape(const mt_dckpt *c, int i, int64_t *rows, int64_t *cols,
                           mt_dtype *dtype) {
  if (rows) *rows = c->ix.t[i].rows;
  if (cols) *cols = c->ix.t[i].cols;
  if (dtype) *dtype = c->ix.t[i].dtype;
}
int mt_dckpt_find(const mt_dckpt *c, const char *name) { return mt_dckpt_index_find(&c->ix, name); }
int mt_dckpt_tensor_used(const mt_dckpt *c, int i) { return c->ix.t[i].used; }

/* The view is consistent with tensor t of the checkpoint. */
static int check_view(const mt_dckpt *c, const mt_dckpt_view *v, char *err, size_t errlen) {
  int ti = mt_dckpt_index_find(&c->ix, v->name);
  if (ti < 0) {
    snprintf(err, errlen, "checkpoint '%s' has no tensor '%s' (the model built from the config "
             "has it, [%" PRId64 ", %" PRId64 "])", c->dir, v->name, v->rows, v->cols);
    return -1;
  }
  const mt_dckpt_tensor *t = &c->ix.t[ti];
  if (t->rows != v->rows || t->cols != v->cols) {
    snprintf(err, errlen,
             "checkpoint tensor '%s' is [%" PRId64 ", %" PRId64 "] but the model built from the "
             "config has [%" PRId64 ", %" PRId64 "] (%s)",
             v->name, t->rows, t->cols, v->rows, v->cols, c->dir);
    return -1;
  }
  if (!mt_dckpt_convertible(v->dtype, t->dtype)) {
    snprintf(err, errlen, "checkpoint tensor '%s' is stored as %s, which cannot be read as %s",
             v->name, mt_dtype_name(t->dtype), mt_dtype_name(v->dtype));
    return -1;
  }
  if (v->nr < 0 || v->nc < 0 || v->r0 < 0 || v->c0 < 0 || v->r0 + v->nr > v->rows ||
      v->c0 + v->nc > v->cols || v->lo < 0 || v->lo > v->hi || v->hi > v->nr * v->nc ||
      (v->hi > v->lo && !v->data)) {
    snprintf(err, errlen,
             "checkpoint load: view of tensor '%s' [%" PRId64 ", %" PRId64 "] is invalid (box "
             "at %" PRId64 ",%" PRId64 " of %" PRId64 "x%" PRId64 ", elements %" PRId64
             "..%" PRId64 ")",
             v->name, v->rows, v->cols, v->r0, v->c0, v->nr, v->nc, v->lo, v->hi);
    return -1;
  }
  return 0;
}

/* Fill host memory `data` (element v->lo of v) from every piece of v's tensor. */
static int fill(mt_dckpt *c, int *fds, const mt_dckpt_view *v, void *data, int64_t *covered,
                char *err, size_t errlen) {
  mt_dckpt_tensor *t = &c->ix.t[mt_dckpt_index_find(&c->ix, v->name)];
  t->used = 1;
  for (int k = 0; k < t->count; k++) {
    const mt_dckpt_piece *p = &c->ix.p[c->ix.sorted[t->first + k]];
    char path[4200];
    shard_path(path, sizeof path, c, p->file);
    if (fds[p->file] < 0) {
      fds[p->file] = open(path, O_RDONLY);
      if (fds[p->file] < 0) {
        snprintf(err, errlen, "cannot open '%s' (tensor '%s'): %s", path, t->name,
                 strerror(errno));
        return -1;
      }
    }
    if (mt_dckpt_fill_from_piece(fds[p->file], path, t, p, v, data, covered, err, errlen))
      return -1;
  }
  return 0;
}

int mt_dckpt_load(mt_dckpt *c, mt_backend *be, const mt_dckpt_view *views, int n_views,
                  char *err, size_t errlen) {
  for (int i = 0; i < n_views; i++)
    if (check_view(c, &views[i], err, errlen)) return -1;
  int *fds = mt_xmalloc((size_t)(c->ix.n_f ? c->ix.n_f : 1) * sizeof *fds);
  for (int i = 0; i < c->ix.n_f; i++) fds[i] = -1;
  unsigned char *stage = NULL;
  int rc = 0;
  for (int i = 0; i < n_views && !rc; i++) {
    const mt_dckpt_view *v = &views[i];
    int64_t covered = 0;
    if (!be || v->host) {
      rc = fill(c, fds, v, v->data, &covered, err, errlen);
    } else {
      size_t es = mt_dtype_size(v->dtype);
      int64_t step = MT_DCKPT_CHUNK / (int64_t)es;
      if (!stage && v->hi > v->lo) stage = mt_xmalloc((size_t)MT_DCKPT_CHUNK);
      for (int64_t x = v->lo; x < v->hi && !rc; x += step) {
        mt_dckpt_view sub = *v;
        sub.lo = x;
        sub.hi = v->hi - x < step ? v->hi : x + step;
        int64_t before = covered;
        rc = fill(c, fds, &sub, stage, &covered, err, errlen);
        if (!rc && covered - before == sub.hi - sub.lo)
          be->ops->memcpy_h2d(be, (char *)v->data + (size_t)(x - v->lo) * es, stage,
                              (size_t)(sub.hi - sub.lo) * es);
      }
    }
    if (!rc && covered > v->hi - v->lo) {
      snprintf(err, errlen,
               "checkpoint '%s': tensor '%s': %" PRId64 " elements this rank needs are stored "
               "more than once",
               c->dir, v->name, covered - (v->hi - v->lo));
      rc = -1;
    } else if (!rc && covered != v->hi - v->lo) {
      snprintf(err, errlen,
               "checkpoint '%s': tensor '%s': %" PRId64 " of the %" PRId64
               " elements this rank needs are not stored",
               c->dir, v->name, v->hi - v->lo - covered, v->hi - v->lo);
      rc = -1;
    }
  }
  for (int i = 0; i < c->ix.n_f; i++)
    if (fds[i] >= 0) close(fds[i]);
  free(fds);
  free(stage);
  return rc;
}

void *mt_dckpt_read_tensor(mt_dckpt *c, const char *name, mt_dtype dtype, char *err,
                           size_t errlen) {
  int ti = mt_dckpt_index_find(&c->ix, name);
  if (ti < 0) {
    snprintf(err, errlen, "checkpoint '%s' has no tensor '%s'", c->dir, name);
    return NULL;
  }
  const mt_dckpt_tensor *t = &c->ix.t[ti];
  mt_dckpt_view v = {0};
  snprintf(v.name, sizeof v.name, "%s", name);
  v.rows = v.nr = t->rows;
  v.cols = v.nc = t->cols;
  v.hi = t->rows * t->cols;
  v.dtype = dtype;
  v.host = 1;
  size_t es = mt_dtype_size(dtype);
  v.data = mt_xmalloc((size_t)(v.hi ? v.hi : 1) * (es ? es : 1));
  if (mt_dckpt_load(c, NULL, &v, 1, err, errlen)) {
    free(v.data);
    return NULL;
  }
  return v.data;
}
