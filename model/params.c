/* model/params.c — parameter registry (see params.h). */
#include "params.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"

int mt_params_add(mt_param_list *pl, const char *name, int64_t rows, int64_t cols,
                  int64_t local_rows, int64_t local_cols, int64_t row_offset, int64_t col_offset,
                  mt_init_kind init, int no_weight_decay, int tp_replicated) {
  if (pl->n == pl->cap) {
    pl->cap = pl->cap ? 2 * pl->cap : 64;
    pl->p = mt_xrealloc(pl->p, (size_t)pl->cap * sizeof(mt_param));
  }
  mt_param *p = &pl->p[pl->n];
  memset(p, 0, sizeof *p);
  MT_ASSERT(strlen(name) < MT_PARAM_NAME_MAX);
  snprintf(p->name, sizeof p->name, "%s", name);
  p->rows = rows;
  p->cols = cols;
  p->local_rows = local_rows;
  p->local_cols = local_cols;
  p->row_offset = row_offset;
  p->col_offset = col_offset;
  p->numel = local_rows * local_cols;
  p->offset = pl->numel;
  p->init = init;
  p->no_weight_decay = no_weight_decay;
  p->tp_replicated = tp_replicated;
  pl->numel = mt_round_up(pl->numel + p->numel, 16);
  return pl->n++;
}

int mt_params_find(const mt_param_list *pl, const char *name) {
  for (int i = 0; i < pl->n; i++)
    if (!strcmp(pl->p[i].name, name)) return i;
  return -1;
}

void mt_params_free(mt_param_list *pl) {
  free(pl->p);
  memset(pl, 0, sizeof *pl);
}
