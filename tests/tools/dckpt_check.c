/* tests/tools/dckpt_check.c — checkpoint/dist_checkpoint.h over MPI ranks.
 * Usage (under mpirun -np N):
 *   dckpt_check save DIR ITER   every rank writes its row cuts (uneven) of
 *                               "w" fp32 [37, 29], flat ZeRO-like ranges of
 *                               "e" bf16 [1, 3000], column cuts of "big"
 *                               fp32 [700, 1000] (several CRC blocks), and
 *                               rank 0 alone "n" int64 [1, 7] (the other
 *                               ranks hold a replica they do not write),
 *                               flat ZeRO-like ranges of "z" [13, 11]
 *                               crossing its rows;
 *   dckpt_check load DIR        every rank reads the latest checkpoint under
 *                               another cut (column boxes of w and their flat
 *                               halves, e as fp32 column boxes, row cuts of
 *                               big, n whole, column boxes of z) and checks every element and
 *                               the metadata.
 * Values are k/8 with |k| <= 127, exact in bf16. Rank 0 prints
 * "dckpt_check OK"; any failure exits 1 with the message. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "parallel/comm.h"
#include "checkpoint/dist_checkpoint.h"

#define SEED 18446744073709551557ull

static float val(int id, int64_t r, int64_t c) {
  return (float)((r * 131 + c * 7 + id * 17) % 255 - 127) / 8.0f;
}

static uint16_t bf16_of(float f) { /* exact for k/8 */
  uint32_t u;
  memcpy(&u, &f, 4);
  return (uint16_t)(u >> 16);
}

/* [start, end) of part i of n equal-ish parts of len (uneven: the first
 * part takes the remainder plus one when it can). */
static void cut(int64_t len, int n, int i, int64_t *s, int64_t *e) {
  int64_t base = len / n, rem = len % n;
  *s = i * base + (i < rem ? i : rem);
  *e = *s + base + (i < rem ? 1 : 0);
}

static mt_dckpt_view mk(const char *name, int64_t rows, int64_t cols, int64_t r0, int64_t c0,
                        int64_t nr, int64_t nc, int64_t lo, int64_t hi, mt_dtype dt, int write) {
  mt_dckpt_view v;
  memset(&v, 0, sizeof v);
  snprintf(v.name, sizeof v.name, "%s", name);
  v.rows = rows, v.cols = cols, v.r0 = r0, v.c0 = c0, v.nr = nr, v.nc = nc, v.lo = lo, v.hi = hi;
  v.dtype = dt;
  v.write = write;
  v.host = 1;
  v.data = mt_xcalloc((size_t)(hi - lo + 1), mt_dtype_size(dt));
  return v;
}

static int id_of(const char *name) {
  return name[0] == 'w' ? 1 : name[0] == 'e' ? 2 : name[0] == 'z' ? 4 : 3;
}

static void fill_view(mt_dckpt_view *v) {
  for (int64_t k = v->lo; k < v->hi; k++) {
    int64_t r = v->r0 + k / v->nc, c = v->c0 + k % v->nc;
    if (v->dtype == MT_I64) ((int64_t *)v->data)[k - v->lo] = r * 1000003 + c - 3;
    else if (v->dtype == MT_BF16) ((uint16_t *)v->data)[k - v->lo] = bf16_of(val(id_of(v->name), r, c));
    else ((float *)v->data)[k - v->lo] = val(id_of(v->name), r, c);
  }
}

static int check_view(const mt_dckpt_view *v, int rank) {
  for (int64_t k = v->lo; k < v->hi; k++) {
    int64_t r = v->r0 + k / v->nc, c = v->c0 + k % v->nc;
    int ok = v->dtype == MT_I64 ? ((int64_t *)v->data)[k - v->lo] == r * 1000003 + c - 3
                                : ((float *)v->data)[k - v->lo] == val(id_of(v->name), r, c);
    if (!ok) {
      fprintf(stderr, "rank %d: tensor %s element (%" PRId64 ", %" PRId64 ") is wrong\n", rank,
              v->name, r, c);
      return 1;
    }
  }
  return 0;
}

int main(int argc, char **argv) {
  mt_dist *d = mt_dist_init(&argc, &argv);
  mt_group *w = mt_dist_world(d);
  int rank = mt_dist_rank(d), n = mt_dist_size(d);
  if (argc < 3 || (strcmp(argv[1], "save") && strcmp(argv[1], "load")) ||
      (!strcmp(argv[1], "save") && argc < 4)) {
    if (rank == 0) fprintf(stderr, "usage: dckpt_check save DIR ITER | load DIR\n");
    mt_dist_finalize(d);
    return 2;
  }
  char err[512];
  mt_dckpt_view v[8];
  int nv = 0, failed = 0;
  int64_t s, e;
  if (!strcmp(argv[1], "save")) {
    cut(37, n, rank, &s, &e);
    v[nv++] = mk("w", 37, 29, s, 0, e - s, 29, 0, (e - s) * 29, MT_F32, 1);
    cut(3000, n, rank, &s, &e);
    v[nv++] = mk("e", 1, 3000, 0, 0, 1, 3000, s, e, MT_BF16, 1);
    cut(1000, n, rank, &s, &e);
    v[nv++] = mk("big", 700, 1000, 0, s, 700, e - s, 0, 700 * (e - s), MT_F32, 1);
    v[nv++] = mk("n", 1, 7, 0, 0, 1, 7, 0, 7, MT_I64, rank == 0);
    cut(13 * 11, n, rank, &s, &e);
    v[nv++] = mk("z", 13, 11, 0, 0, 13, 11, s, e, MT_F32, 1);
    for (int i = 0; i < nv; i++) fill_view(&v[i]);
    mt_dckpt_meta m = {.iteration = atoll(argv[3]), .consumed_samples = 96, .step = 3,
                       .seed = SEED, .vocab_size = 37, .has_optimizer = 1};
    if (mt_dckpt_save(argv[2], &m, "{\"ranks\": 3}", NULL, v, nv, w, err, sizeof err)) {
      fprintf(stderr, "rank %d: save failed: %s\n", rank, err);
      failed = 1;
    }
  } else {
    mt_dckpt *c = NULL;
    if (mt_dckpt_open(argv[2], -1, &c, err, sizeof err)) {
      fprintf(stderr, "rank %d: open failed: %s\n", rank, err);
      exit(1);
    }
    const mt_dckpt_meta *m = mt_dckpt_meta_of(c);
    if (m->seed != SEED || m->consumed_samples != 96 || m->step != 3 || m->vocab_size != 37) {
      fprintf(stderr, "rank %d: metadata differs\n", rank);
      failed = 1;
    }
    cut(29, n, rank, &s, &e);
    int64_t half = 37 * (e - s) / 2;
    v[nv++] = mk("w", 37, 29, 0, s, 37, e - s, 0, 37 * (e - s), MT_F32, 0);
    v[nv++] = mk("w", 37, 29, 0, s, 37, e - s, 0, half, MT_F32, 0);
    v[nv++] = mk("w", 37, 29, 0, s, 37, e - s, half, 37 * (e - s), MT_F32, 0);
    cut(3000, n, rank, &s, &e);
    v[nv++] = mk("e", 1, 3000, 0, s, 1, e - s, 0, e - s, MT_F32, 0);
    cut(700, n, rank, &s, &e);
    v[nv++] = mk("big", 700, 1000, s, 0, e - s, 1000, 0, (e - s) * 1000, MT_F32, 0);
    v[nv++] = mk("n", 1, 7, 0, 0, 1, 7, 0, 7, MT_I64, 0);
    cut(11, n, rank, &s, &e);
    v[nv++] = mk("z", 13, 11, 0, s, 13, e - s, 0, 13 * (e - s), MT_F32, 0);
    if (mt_dckpt_load(c, NULL, v, nv, err, sizeof err)) {
      fprintf(stderr, "rank %d: load failed: %s\n", rank, err);
      failed = 1;
    }
    for (int i = 0; i < nv && !failed; i++) failed = check_view(&v[i], rank);
    mt_dckpt_close(c);
  }
  for (int i = 0; i < nv; i++) free(v[i].data);
  int32_t f = failed;
  mt_allreduce(w, &f, 1, MT_I32, MT_OP_MAX);
  if (rank == 0 && !f) printf("dckpt_check OK (%s on %d ranks)\n", argv[1], n);
  mt_dist_finalize(d);
  return f ? 1 : 0;
}
