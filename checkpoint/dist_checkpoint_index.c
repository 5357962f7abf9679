/* checkpoint/dist_checkpoint_index.c — the piece index of a layout-free
 * checkpoint: building it, the name table, index.bin encoding/decoding and
 * the coverage check (every tensor covered exactly once). See
 * checkpoint/dist_checkpoint_internal.h for the binary layout. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fileio.h"
#include "core/hash.h"
#include "core/util.h"
#include "checkpoint/dist_checkpoint_internal.h"

typedef struct {
  int32_t *slot; /* tensor id + 1, 0 = empty */
  int64_t cap;   /* power of two */
} name_map;

static uint64_t name_hash(const char *s) { return mt_fnv1a64_str(MT_FNV1A64_INIT, s); }

static void map_insert(name_map *m, const mt_dckpt_tensor *t, int32_t id) {
  uint64_t h = name_hash(t[id].name);
  for (int64_t k = (int64_t)(h & (uint64_t)(m->cap - 1));; k = (k + 1) & (m->cap - 1))
    if (!m->slot[k]) {
      m->slot[k] = id + 1;
      return;
    }
}

static void map_rebuild(mt_dckpt_index *ix, int64_t want) {
  name_map *m = ix->name_map;
  if (!m) ix->name_map = m = mt_xcalloc(1, sizeof *m);
  int64_t cap = 64;
  while (cap < 2 * want) cap *= 2;
  free(m->slot);
  m->slot = mt_xcalloc((size_t)cap, sizeof *m->slot);
  m->cap = cap;
  for (int32_t i = 0; i < ix->n_t; i++) map_insert(m, ix->t, i);
}

int mt_dckpt_index_find(const mt_dckpt_index *ix, const char *name) {
  const name_map *m = ix->name_map;
  if (!m) return -1;
  uint64_t h = name_hash(name);
  for (int64_t k = (int64_t)(h & (uint64_t)(m->cap - 1));; k = (k + 1) & (m->cap - 1)) {
    if (!m->slot[k]) return -1;
    if (!strcmp(ix->t[m->slot[k] - 1].name, name)) return m->slot[k] - 1;
  }
}

void mt_dckpt_index_free(mt_dckpt_index *ix) {
  for (int i = 0; i < ix->n_p; i++) free(ix->p[i].crc);
  free(ix->p);
  free(ix->t);
  free(ix->f);
  free(ix->sorted);
  if (ix->name_map) free(((name_map *)ix->name_map)->slot);
  free(ix->name_map);
  memset(ix, 0, sizeof *ix);
}

static void shape_str(char *o, size_t n, int64_t r, int64_t c) {
  snprintf(o, n, "[%" PRId64 ", %" PRId64 "]", r, c);
}

int mt_dckpt_index_tensor(mt_dckpt_index *ix, const char *name, int64_t rows, int64_t cols,
                          int dtype, char *err, size_t errlen) {
  int i = mt_dckpt_index_find(ix, name);
  if (i >= 0) {
    mt_dckpt_tensor *t = &ix->t[i];
    if (t->rows != rows || t->cols != cols) {
      char a[64], b[64];
      shape_str(a, sizeof a, t->rows, t->cols);
      shape_str(b, sizeof b, rows, cols);
      snprintf(err, errlen, "tensor '%s' is given with two global shapes: %s and %s", name, a, b);
      return -1;
    }
    if (dtype >= 0 && (int)t->dtype >= 0 && (int)t->dtype != dtype) {
      snprintf(err, errlen, "tensor '%s' is written as %s and as %s by different ranks", name,
               mt_dtype_name(t->dtype), mt_dtype_name((mt_dtype)dtype));
      return -1;
    }
    if (dtype >= 0) t->dtype = (mt_dtype)dtype;
    return i;
  }
  if (strlen(name) >= MT_DCKPT_NAME_MAX || rows < 0 || cols < 0) {
    snprintf(err, errlen, "tensor '%.60s...': name longer than %d bytes or negative shape", name,
             MT_DCKPT_NAME_MAX - 1);
    return -1;
  }
  if (ix->n_t % 256 == 0) ix->t = mt_xrealloc(ix->t, (size_t)(ix->n_t + 256) * sizeof *ix->t);
  mt_dckpt_tensor *t = &ix->t[ix->n_t];
  memset(t, 0, sizeof *t);
  snprintf(t->name, sizeof t->name, "%s", name);
  t->rows = rows;
  t->cols = cols;
  t->dtype = (mt_dtype)dtype;
  ix->n_t++;
  name_map *m = ix->name_map;
  if (!m || 2 * ix->n_t > m->cap) map_rebuild(ix, ix->n_t);
  else map_insert(m, ix->t, ix->n_t - 1);
  return ix->n_t - 1;
}

void mt_dckpt_index_finish(mt_dckpt_index *ix) {
  for (int i = 0; i < ix->n_t; i++) ix->t[i].count = 0;
  for (int i = 0; i < ix->n_p; i++) ix->t[ix->p[i].tensor].count++;
  int32_t acc = 0;
  for (int i = 0; i < ix->n_t; i++) {
    ix->t[i].first = acc;
    acc += ix->t[i].count;
    ix->t[i].count = 0;
  }
  free(ix->sorted);
  ix->sorted = mt_xmalloc((size_t)(ix->n_p ? ix->n_p : 1) * sizeof *ix->sorted);
  for (int i = 0; i < ix->n_p; i++) {
    mt_dckpt_tensor *t = &ix->t[ix->p[i].tensor];
    ix->sorted[t->first + t->count++] = i;
  }
  map_rebuild(ix, ix->n_t);
}

/* ---- coverage ---- */

typedef struct {
  int64_t a, b; /* global flat [a, b) */
  int32_t piece;
} interval;

static int cmp_interval(const void *x, const void *y) {
  const interval *p = x, *q = y;
  return p->a < q->a ? -1 : p->a > q->a ? 1 : 0;
}

/* The global flat intervals of piece p of a tensor with `cols` columns. */
static void piece_intervals(const mt_dckpt_piece *p, int64_t cols, int32_t id, interval **v,
                            int64_t *n, int64_t *cap) {
  if (p->lo == p->hi) return;
  int64_t i0 = p->lo / p->nc, i1 = (p->hi - 1) / p->nc; /* box rows touched */
  if (p->nc == cols) i1 = i0;                           /* one contiguous run */
  for (int64_t i = i0; i <= i1; i++) {
    int64_t s = p->nc == cols ? p->lo : (p->lo > i * p->nc ? p->lo : i * p->nc);
    int64_t e = p->nc == cols ? p->hi : (p->hi < (i + 1) * p->nc ? p->hi : (i + 1) * p->nc);
    if (*n == *cap) {
      *cap = *cap * 2 + 64;
      *v = mt_xrealloc(*v, (size_t)*cap * sizeof **v);
    }
    /* box element k = row k / nc, column k % nc */
    int64_t ga = (p->r0 + s / p->nc) * cols + p->c0 + s % p->nc;
    (*v)[(*n)++] = (interval){ga, ga + (e - s), id};
  }
}

int mt_dckpt_index_validate(const mt_dckpt_index *ix, const char *where, char *err,
                            size_t errlen) {
  /* shapes first: rows * cols * element size fits in int64, so every product
   * of in-bounds piece coordinates below does too */
  for (int i = 0; i < ix->n_t; i++) {
    const mt_dckpt_tensor *t = &ix->t[i];
    int64_t numel, bytes;
    size_t es = mt_dtype_size(t->dtype);
    if (t->rows < 0 || t->cols < 0 || __builtin_mul_overflow(t->rows, t->cols, &numel) ||
        __builtin_mul_overflow(numel, (int64_t)(es ? es : 1), &bytes)) {
      snprintf(err, errlen,
               "%s: tensor '%s' has an impossible shape [%" PRId64 ", %" PRId64
               "] (its size overflows 64 bits)",
               where, t->name, t->rows, t->cols);
      return -1;
    }
  }
  for (int i = 0; i < ix->n_p; i++) {
    const mt_dckpt_piece *p = &ix->p[i];
    const mt_dckpt_tensor *t = &ix->t[p->tensor];
    size_t es = mt_dtype_size(t->dtype);
    if (es == 0 || t->dtype == MT_I32 || t->dtype == MT_F64) {
      snprintf(err, errlen, "%s: tensor '%s' has an unknown dtype %d", where, t->name,
               (int)t->dtype);
      return -1;
    }
    if (p->r0 < 0 || p->c0 < 0 || p->nr < 0 || p->nc < 0 || p->r0 > t->rows ||
        p->nr > t->rows - p->r0 || p->c0 > t->cols || p->nc > t->cols - p->c0 || p->lo < 0 ||
        p->lo > p->hi || p->hi > p->nr * p->nc ||
        p->nbytes != (p->hi - p->lo) * (int64_t)es ||
        p->n_blocks != (p->nbytes + MT_DCKPT_BLOCK - 1) / MT_DCKPT_BLOCK) {
      snprintf(err, errlen,
               "%s: a piece of tensor '%s' [%" PRId64 ", %" PRId64 "] lies outside it or has an "
               "inconsistent size (box at %" PRId64 ",%" PRId64 " of %" PRId64 "x%" PRId64
               ", elements %" PRId64 "..%" PRId64 ", %" PRId64 " bytes)",
               where, t->name, t->rows, t->cols, p->r0, p->c0, p->nr, p->nc, p->lo, p->hi,
               p->nbytes);
      return -1;
    }
  }
  interval *v = NULL;
  int64_t cap = 0;
  int rc = 0;
  for (int ti = 0; ti < ix->n_t && !rc; ti++) {
    const mt_dckpt_tensor *t = &ix->t[ti];
    int64_t n = 0, total = 0;
    for (int k = 0; k < t->count; k++) {
      const mt_dckpt_piece *p = &ix->p[ix->sorted[t->first + k]];
      piece_intervals(p, t->cols, ix->sorted[t->first + k], &v, &n, &cap);
      total += p->hi - p->lo;
    }
    if (n > 1) qsort(v, (size_t)n, sizeof *v, cmp_interval);
    for (int64_t k = 1; k < n; k++)
      if (v[k].a < v[k - 1].b) {
        int64_t e = v[k].a;
        snprintf(err, errlen,
                 "%s: tensor '%s': two stored pieces overlap (element row %" PRId64
                 ", column %" PRId64 " is stored twice)",
                 where, t->name, e / t->cols, e % t->cols);
        rc = -1;
        break;
      }
    if (!rc && total == 0 && t->rows * t->cols > 0) {
      snprintf(err, errlen,
               "%s: tensor '%s' [%" PRId64 ", %" PRId64 "] has no stored piece (no rank wrote "
               "it: 0 of %" PRId64 " elements)",
               where, t->name, t->rows, t->cols, t->rows * t->cols);
      rc = -1;
    } else if (!rc && total != t->rows * t->cols) {
      int64_t gap = 0; /* first element not covered */
      for (int64_t k = 0; k < n && v[k].a == gap; k++) gap = v[k].b;
      snprintf(err, errlen,
               "%s: tensor '%s' [%" PRId64 ", %" PRId64 "] is incomplete: %" PRId64
               " of %" PRId64 " elements stored (first missing: row %" PRId64 ", column %" PRId64
               ")",
               where, t->name, t->rows, t->cols, total, t->rows * t->cols,
               t->cols ? gap / t->cols : 0, t->cols ? gap % t->cols : 0);
      rc = -1;
    }
  }
  free(v);
  return rc;
}

/* ---- encoding ---- */

void mt_dckpt_buf_put(mt_dckpt_buf *b, const void *src, size_t n) {
  if (b->n + n > b->cap) {
    b->cap = (b->n + n) * 2 + 4096;
    b->p = mt_xrealloc(b->p, b->cap);
  }
  memcpy(b->p + b->n, src, n);
  b->n += n;
}


unsigned char *mt_dckpt_index_encode(const mt_dckpt_index *ix, size_t *n) {
  mt_dckpt_buf b = {0};
  uint32_t version = MT_DCKPT_INDEX_VERSION, nt = (uint32_t)ix->n_t, nf = (uint32_t)ix->n_f,
           np = (uint32_t)ix->n_p;
  uint64_t block = (uint64_t)MT_DCKPT_BLOCK;
  mt_dckpt_buf_put(&b, MT_DCKPT_INDEX_MAGIC, 8);
  MT_DCKPT_PUT(&b, version);
  MT_DCKPT_PUT(&b, nt);
  MT_DCKPT_PUT(&b, nf);
  MT_DCKPT_PUT(&b, np);
  MT_DCKPT_PUT(&b, block);
  for (int i = 0; i < ix->n_f; i++) {
    MT_DCKPT_PUT(&b, ix->f[i].rank);
    MT_DCKPT_PUT(&b, ix->f[i].bytes);
  }
  for (int i = 0; i < ix->n_t; i++) {
    const mt_dckpt_tensor *t = &ix->t[i];
    uint32_t len = (uint32_t)strlen(t->name), dt = (uint32_t)t->dtype;
    MT_DCKPT_PUT(&b, len);
    mt_dckpt_buf_put(&b, t->name, len);
    MT_DCKPT_PUT(&b, t->rows);
    MT_DCKPT_PUT(&b, t->cols);
    MT_DCKPT_PUT(&b, dt);
  }
  for (int i = 0; i < ix->n_p; i++) {
    const mt_dckpt_piece *p = &ix->p[i];
    MT_DCKPT_PUT(&b, p->tensor);
    MT_DCKPT_PUT(&b, p->file);
    MT_DCKPT_PUT(&b, p->offset);
    MT_DCKPT_PUT(&b, p->nbytes);
    mt_dckpt_buf_put(&b, &p->r0, 6 * sizeof(int64_t));
    MT_DCKPT_PUT(&b, p->n_blocks);
    mt_dckpt_buf_put(&b, p->crc, (size_t)p->n_blocks * sizeof(uint32_t));
  }
  MT_DCKPT_PUT(&b, ix->meta_crc);
  uint32_t crc = mt_crc32(0, b.p, b.n);
  MT_DCKPT_PUT(&b, crc);
  *n = b.n;
  return b.p;
}

typedef struct {
  const unsigned char *p;
  size_t n, off;
  int bad;
} rd_t;

static void get(rd_t *r, void *dst, size_t n) {
  if (r->bad || r->n - r->off < n) {
    r->bad = 1;
    memset(dst, 0, n);
    return;
  }
  memcpy(dst, r->p + r->off, n);
  r->off += n;
}
#define GET(r, v) get((r), &(v), sizeof(v))

int mt_dckpt_index_decode(mt_dckpt_index *ix, const unsigned char *b, size_t n, const char *path,
                          char *err, size_t errlen) {
  memset(ix, 0, sizeof *ix);
  if (n < 36 || memcmp(b, MT_DCKPT_INDEX_MAGIC, 8) != 0) {
    snprintf(err, errlen, "'%s' is not a megatrain checkpoint index (bad magic or too short)",
             path);
    return -1;
  }
  uint32_t crc;
  memcpy(&crc, b + n - 4, 4);
  if (mt_crc32(0, b, n - 4) != crc) {
    snprintf(err, errlen, "'%s': checksum mismatch of the checkpoint index", path);
    return -1;
  }
  rd_t r = {b, n - 4, 8, 0};
  uint32_t version, nt, nf, np;
  uint64_t block;
  GET(&r, version);
  GET(&r, nt);
  GET(&r, nf);
  GET(&r, np);
  GET(&r, block);
  if ((version != 1 && version != MT_DCKPT_INDEX_VERSION) || block != (uint64_t)MT_DCKPT_BLOCK) {
    snprintf(err, errlen,
             "'%s': index version %u with %" PRIu64 "-byte blocks; this build reads versions 1 "
             "and %u with %" PRId64 "-byte blocks",
             path, version, block, MT_DCKPT_INDEX_VERSION, MT_DCKPT_BLOCK);
    return -1;
  }
  if (version >= 2) { /* metadata.json's CRC, just before the index's own */
    if (r.n < 36) goto truncated;
    r.n -= 4;
    memcpy(&ix->meta_crc, b + r.n, 4);
    ix->has_meta_crc = 1;
  }
  if ((uint64_t)nf * 12 + (uint64_t)nt * 24 + (uint64_t)np * 68 > n) goto truncated;
  ix->f = mt_xcalloc(nf ? nf : 1, sizeof *ix->f);
  ix->n_f = (int)nf;
  for (uint32_t i = 0; i < nf; i++) {
    GET(&r, ix->f[i].rank);
    GET(&r, ix->f[i].bytes);
  }
  for (uint32_t i = 0; i < nt && !r.bad; i++) {
    uint32_t len, dt;
    char name[MT_DCKPT_NAME_MAX];
    int64_t rows, cols;
    GET(&r, len);
    if (len >= MT_DCKPT_NAME_MAX) goto truncated;
    get(&r, name, len);
    name[len] = '\0';
    GET(&r, rows);
    GET(&r, cols);
    GET(&r, dt);
    if (r.bad) break;
    if (mt_dckpt_index_find(ix, name) >= 0) {
      snprintf(err, errlen, "'%s': tensor '%s' is listed twice", path, name);
      goto fail;
    }
    if (mt_dckpt_index_tensor(ix, name, rows, cols, (int)dt, err, errlen) < 0) goto fail;
  }
  ix->p = mt_xcalloc(np ? np : 1, sizeof *ix->p);
  for (uint32_t i = 0; i < np && !r.bad; i++) {
    mt_dckpt_piece *p = &ix->p[i];
    GET(&r, p->tensor);
    GET(&r, p->file);
    GET(&r, p->offset);
    GET(&r, p->nbytes);
    get(&r, &p->r0, 6 * sizeof(int64_t));
    GET(&r, p->n_blocks);
    if (r.bad || p->n_blocks < 0 || (size_t)p->n_blocks * 4 > r.n - r.off) goto truncated;
    p->crc = mt_xmalloc((size_t)(p->n_blocks ? p->n_blocks : 1) * sizeof(uint32_t));
    get(&r, p->crc, (size_t)p->n_blocks * sizeof(uint32_t));
    ix->n_p = (int)i + 1;
    if (p->tensor < 0 || p->tensor >= (int32_t)nt || p->file < 0 || p->file >= (int32_t)nf ||
        p->offset < MT_DCKPT_SHARD_HEADER) {
      snprintf(err, errlen, "'%s': piece %u names tensor %d / file %d / offset %" PRId64
               ", outside the index", path, i, p->tensor, p->file, p->offset);
      goto fail;
    }
  }
  if (r.bad || r.off != r.n) goto truncated;
  mt_dckpt_index_finish(ix);
  return 0;
truncated:
  snprintf(err, errlen, "'%s': the checkpoint index is truncated or malformed", path);
fail:
  mt_dckpt_index_free(ix);
  return -1;
}
