/* model/moe_rowbuf.c — grow-only row buffers (see moe_rowbuf.h). */
#include "model/moe_rowbuf.h"

#include <stdlib.h>

#include "core/util.h"

typedef struct {
  void **p;
  int64_t width;
  mt_dtype t;
  mt_mem_cat cat;
  const int64_t *keep;
} entry;

struct mt_moe_rowbuf {
  mt_backend *be;
  int64_t rows, rows_max;
  entry *e;
  int n, cap;
};

static size_t buf_bytes(int64_t rows, int64_t width, mt_dtype t) {
  const int64_t n = rows * width;
  return (size_t)(n > 0 ? n : 1) * mt_dtype_size(t);
}

mt_moe_rowbuf *mt_moe_rowbuf_create(mt_backend *be, int64_t rows0, int64_t rows_max) {
  MT_ASSERT(rows0 >= 0 && rows0 <= rows_max);
  mt_moe_rowbuf *g = mt_xcalloc(1, sizeof *g);
  g->be = be;
  g->rows = rows0;
  g->rows_max = rows_max;
  return g;
}

void mt_moe_rowbuf_destroy(mt_moe_rowbuf *g) {
  if (!g) return;
  MT_ASSERT(g->n == 0);
  free(g->e);
  free(g);
}

void mt_moe_rowbuf_add(mt_moe_rowbuf *g, void **p, int64_t width, mt_dtype t, mt_mem_cat cat,
                       const int64_t *keep) {
  if (g->n == g->cap) {
    g->cap = g->cap ? 2 * g->cap : 16;
    g->e = mt_xrealloc(g->e, sizeof(entry) * (size_t)g->cap);
  }
  *p = g->be->ops->alloc(g->be, buf_bytes(g->rows, width, t), cat);
  g->e[g->n++] = (entry){p, width, t, cat, keep};
}

void mt_moe_rowbuf_remove(mt_moe_rowbuf *g, void **p) {
  for (int i = 0; i < g->n; i++)
    if (g->e[i].p == p) {
      g->be->ops->free(g->be, *p);
      *p = NULL;
      g->e[i] = g->e[--g->n];
      return;
    }
  MT_ASSERT(!"mt_moe_rowbuf_remove: buffer not registered");
}

void mt_moe_rowbuf_reserve(mt_moe_rowbuf *g, int64_t rows) {
  if (rows <= g->rows) return;
  MT_ASSERT(rows <= g->rows_max);
  mt_backend *be = g->be;
  for (int i = 0; i < g->n; i++) {
    entry *x = &g->e[i];
    int64_t k = x->keep ? *x->keep : 0;
    if (k > g->rows) k = g->rows;
    const size_t kb = k > 0 ? (size_t)(k * x->width) * mt_dtype_size(x->t) : 0;
    void *host = kb ? mt_xmalloc(kb) : NULL;
    if (kb) be->ops->memcpy_d2h(be, host, *x->p, kb);
    be->ops->free(be, *x->p);
    *x->p = be->ops->alloc(be, buf_bytes(rows, x->width, x->t), x->cat);
    if (kb) be->ops->memcpy_h2d(be, *x->p, host, kb);
    free(host);
  }
  g->rows = rows;
}

int64_t mt_moe_rowbuf_rows(const mt_moe_rowbuf *g) { return g->rows; }
