/* model/moe_etp.c — the ETP exchange around the local experts (see
 * moe_etp.h). */
#include "model/moe_etp.h"

#include <stdlib.h>
#include <string.h>

#include "core/util.h"

struct mt_moe_etp {
  mt_backend *be;
  mt_moe_etp_config c;
  int n;                      /* etp */
  int64_t *el, *el_d;         /* [etp] host: elements per rank, displacements (elements) */
  void *buf0, *buf1;          /* [C, h] T (MT_MEM_WORKSPACE, in c.rows): partial sums,
                                 gathered output gradient */
};

mt_moe_etp *mt_moe_etp_create(mt_backend *be, const mt_moe_etp_config *c) {
  MT_ASSERT(c->etp && mt_group_size(c->etp) >= 2 && c->n_blocks >= 1 && c->rows);
  mt_moe_etp *t = mt_xcalloc(1, sizeof *t);
  t->be = be;
  t->c = *c;
  t->n = mt_group_size(c->etp);
  t->el = mt_xcalloc((size_t)t->n, sizeof(int64_t));
  t->el_d = mt_xcalloc((size_t)t->n, sizeof(int64_t));
  mt_moe_rowbuf_add(c->rows, &t->buf0, c->h, be->dtype, MT_MEM_WORKSPACE, NULL);
  mt_moe_rowbuf_add(c->rows, &t->buf1, c->h, be->dtype, MT_MEM_WORKSPACE, NULL);
  return t;
}

void mt_moe_etp_destroy(mt_moe_etp *t) {
  if (!t) return;
  mt_moe_rowbuf_remove(t->c.rows, &t->buf0);
  mt_moe_rowbuf_remove(t->c.rows, &t->buf1);
  free(t->el);
  free(t->el_d);
  free(t);
}

int64_t mt_moe_etp_rows_capacity(const mt_moe_etp *t) { return t->n * t->c.r_max; }

void mt_moe_etp_state_init(mt_moe_etp *t, mt_moe_etp_state *s) {
  memset(s, 0, sizeof *s);
  s->counts = mt_xcalloc((size_t)t->n * t->c.n_blocks, sizeof(int64_t));
  s->rows = mt_xcalloc((size_t)t->n, sizeof(int64_t));
  s->displ = mt_xcalloc((size_t)t->n, sizeof(int64_t));
  mt_moe_rowbuf_add(t->c.rows, &s->x, t->c.h, t->be->dtype, MT_MEM_ACT, &s->R);
}

void mt_moe_etp_state_free(mt_moe_etp *t, mt_moe_etp_state *s) {
  mt_moe_rowbuf_remove(t->c.rows, &s->x);
  free(s->counts);
  free(s->rows);
  free(s->displ);
  memset(s, 0, sizeof *s);
}

/* Element counts / displacements of the row blocks of s (for the v-collectives). */
static void row_elems(mt_moe_etp *t, const mt_moe_etp_state *s) {
  for (int r = 0; r < t->n; r++) {
    t->el[r] = s->rows[r] * t->c.h;
    t->el_d[r] = s->displ[r] * t->c.h;
  }
}

/* rows [R_r, h] of every ETP rank -> all [R, h] in ETP-rank order. */
static void gather_rows(mt_moe_etp *t, const mt_moe_etp_state *s, void *all, const void *mine) {
  row_elems(t, s);
  mt_allgatherv(t->c.etp, mine, t->el[mt_group_rank(t->c.etp)], all, t->el, t->el_d,
                t->be->dtype);
}

/* partial sums all [R, h] -> this rank's rows [R_r, h], summed over ETP. */
static void scatter_rows(mt_moe_etp *t, const mt_moe_etp_state *s, void *mine, const void *all) {
  row_elems(t, s);
  mt_reduce_scatterv(t->c.etp, all, t->el, mine, t->be->dtype, MT_OP_SUM);
}

void mt_moe_etp_experts_forward(mt_moe_etp *t, mt_moe_etp_state *s, mt_moe_experts *x,
                                mt_moe_experts_acts *a, const mt_moe_expert_weights *w, void *y,
                                const void *in, const int64_t *counts, int64_t R) {
  if (!t) {
    mt_moe_experts_forward(x, a, w, y, in, counts, R);
    return;
  }
  const int nb = t->c.n_blocks;
  MT_ASSERT(R <= t->c.r_max);
  /* 1. counts of every ETP rank; rows per rank and their offsets */
  mt_allgather(t->c.etp, counts, s->counts, nb, MT_I64);
  s->R = 0;
  for (int r = 0; r < t->n; r++) {
    s->rows[r] = 0;
    for (int b = 0; b < nb; b++) s->rows[r] += s->counts[(int64_t)r * nb + b];
    s->displ[r] = s->R;
    s->R += s->rows[r];
  }
  MT_ASSERT(s->rows[mt_group_rank(t->c.etp)] == R);
  mt_moe_rowbuf_reserve(t->c.rows, s->R); /* the gathered rows' buffers, before they move */
  /* 2. every ETP rank's rows; 3. this rank's shard of each expert (partial
   * fc2 sums); 4. the sums of this rank's rows */
  gather_rows(t, s, s->x, in);
  mt_moe_experts_forward(x, a, w, t->buf0, s->x, s->counts, s->R);
  scatter_rows(t, s, y, t->buf0);
}

void mt_moe_etp_experts_backward(mt_moe_etp *t, mt_moe_etp_state *s, mt_moe_experts *x,
                                 mt_moe_experts_acts *a, const mt_moe_expert_weights *w,
                                 const mt_moe_expert_grads *g, void *dx, const void *dy,
                                 const void *in, const int64_t *counts, int64_t R) {
  if (!t) {
    mt_moe_experts_backward(x, a, w, g, dx, dy, in, counts, R);
    return;
  }
  /* the gradient of every ETP rank's rows (backward of the reduce-scatter),
   * the shards' input-gradient partials, their sums for this rank's rows
   * (backward of the all-gather) */
  gather_rows(t, s, t->buf1, dy);
  mt_moe_experts_backward(x, a, w, g, t->buf0, t->buf1, s->x, s->counts, s->R);
  scatter_rows(t, s, dx, t->buf0);
}
