/* checkpoint/dist_checkpoint_copy.c — the overlap of a stored piece and a view
 * (box intersection, then the [lo, hi) flat ranges of both, row by row),
 * reading only the 1 MiB blocks of the piece that hold it (pread), verifying
 * their CRC-32, and copying with fp32 <-> bf16 conversion. Host memory only;
 * dist_checkpoint_load.c stages device views. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/dtype.h"
#include "core/fileio.h"
#include "core/util.h"
#include "checkpoint/dist_checkpoint_internal.h"

int mt_dckpt_convertible(mt_dtype d, mt_dtype s) {
  int df = d == MT_F32 || d == MT_BF16, sf = s == MT_F32 || s == MT_BF16;
  return (df && sf) || (d == MT_I64 && s == MT_I64);
}

void mt_dckpt_convert(void *dst, mt_dtype d, const void *src, mt_dtype s, int64_t n) {
  if (d == s) {
    memcpy(dst, src, (size_t)n * mt_dtype_size(d));
  } else if (d == MT_BF16 && s == MT_F32) {
    uint16_t *o = dst;
    const float *x = src;
    for (int64_t i = 0; i < n; i++) o[i] = mt_f32_to_bf16(x[i]);
  } else if (d == MT_F32 && s == MT_BF16) {
    float *o = dst;
    const uint16_t *x = src;
    for (int64_t i = 0; i < n; i++) o[i] = mt_bf16_to_f32(x[i]);
  } else {
    mt_fatal("checkpoint: no conversion from %s to %s", mt_dtype_name(s), mt_dtype_name(d));
  }
}

/* Columns [*a, *b) (global) of row r held by a region (box r0,c0,nr,nc with
 * flat elements [lo, hi)); empty when *a >= *b. */
static void row_cols(int64_t r, int64_t r0, int64_t c0, int64_t nc, int64_t lo, int64_t hi,
                     int64_t *a, int64_t *b) {
  int64_t i = r - r0, s = i * nc, e = s + nc;
  if (lo > s) s = lo;
  if (hi < e) e = hi;
  *a = c0 + s - i * nc;
  *b = c0 + e - i * nc;
}

/* One overlap segment: row r, global columns [a, b). */
typedef struct {
  int64_t pe, ve, len; /* piece element (from its lo), view element (from its lo), count */
} seg;

/* Read piece bytes [start, end) (block aligned) of p into buf and verify the
 * blocks' CRCs. */
static int read_blocks(int fd, const char *path, const mt_dckpt_tensor *t,
                       const mt_dckpt_piece *p, int64_t start, int64_t end, unsigned char *buf,
                       char *err, size_t errlen) {
  int64_t got = 0;
  while (got < end - start) {
    ssize_t k = pread(fd, buf + got, (size_t)(end - start - got), p->offset + start + got);
    if (k < 0 && errno == EINTR) continue;
    if (k < 0) {
      snprintf(err, errlen, "cannot read '%s' (tensor '%s'): %s", path, t->name,
               strerror(errno));
      return -1;
    }
    if (k == 0) {
      snprintf(err, errlen,
               "'%s' is truncated: tensor '%s' needs bytes up to %" PRId64 " of the file",
               path, t->name, p->offset + end);
      return -1;
    }
    got += k;
  }
  for (int64_t b = start; b < end; b += MT_DCKPT_BLOCK) {
    int64_t n = end - b < MT_DCKPT_BLOCK ? end - b : MT_DCKPT_BLOCK;
    int64_t bi = b / MT_DCKPT_BLOCK;
    if (mt_crc32(0, buf + (b - start), (size_t)n) != p->crc[bi]) {
      snprintf(err, errlen,
               "'%s': checksum mismatch in tensor '%s' (block %" PRId64 " of the piece at "
               "byte %" PRId64 ")",
               path, t->name, bi, p->offset);
      return -1;
    }
  }
  return 0;
}

int mt_dckpt_fill_from_piece(int fd, const char *path, const mt_dckpt_tensor *t,
                             const mt_dckpt_piece *p, const mt_dckpt_view *v, void *vdata,
                             int64_t *covered, char *err, size_t errlen) {
  if (p->lo == p->hi || v->lo == v->hi) return 0;
  /* rows holding elements of both */
  int64_t R0 = v->r0 + v->lo / v->nc, R1 = v->r0 + (v->hi - 1) / v->nc + 1;
  int64_t pr0 = p->r0 + p->lo / p->nc, pr1 = p->r0 + (p->hi - 1) / p->nc + 1;
  if (pr0 > R0) R0 = pr0;
  if (pr1 < R1) R1 = pr1;
  if (R0 >= R1 || p->c0 >= v->c0 + v->nc || v->c0 >= p->c0 + p->nc) return 0;
  size_t ses = mt_dtype_size(t->dtype), ves = mt_dtype_size(v->dtype);
  int64_t max_seg = (MT_DCKPT_CHUNK - MT_DCKPT_BLOCK) / (int64_t)ses;
  /* the piece's byte span needed: the first and last segments */
  int64_t span0 = -1, span1 = -1;
  for (int64_t r = R0; r < R1; r++) {
    int64_t va, vb, pa, pb;
    row_cols(r, v->r0, v->c0, v->nc, v->lo, v->hi, &va, &vb);
    row_cols(r, p->r0, p->c0, p->nc, p->lo, p->hi, &pa, &pb);
    int64_t a = va > pa ? va : pa, b = vb < pb ? vb : pb;
    if (a >= b) continue;
    int64_t pe = (r - p->r0) * p->nc + (a - p->c0) - p->lo;
    if (span0 < 0) span0 = pe;
    span1 = pe + (b - a);
  }
  if (span0 < 0) return 0;
  int64_t span_end = span1 * (int64_t)ses; /* bytes of the piece needed: < span_end */
  int64_t win0 = 0, win1 = 0;              /* bytes of the piece in buf */
  int64_t cap = span_end - span0 * (int64_t)ses + 2 * MT_DCKPT_BLOCK;
  if (cap > MT_DCKPT_CHUNK) cap = MT_DCKPT_CHUNK;
  unsigned char *buf = mt_xmalloc((size_t)cap);
  int rc = 0;
  for (int64_t r = R0; r < R1 && !rc; r++) {
    int64_t va, vb, pa, pb;
    row_cols(r, v->r0, v->c0, v->nc, v->lo, v->hi, &va, &vb);
    row_cols(r, p->r0, p->c0, p->nc, p->lo, p->hi, &pa, &pb);
    int64_t a = va > pa ? va : pa, b = vb < pb ? vb : pb;
    for (; a < b && !rc;) {
      int64_t len = b - a < max_seg ? b - a : max_seg;
      seg s = {(r - p->r0) * p->nc + (a - p->c0) - p->lo,
               (r - v->r0) * v->nc + (a - v->c0) - v->lo, len};
      int64_t sb = s.pe * (int64_t)ses, eb = (s.pe + len) * (int64_t)ses;
      if (sb < win0 || eb > win1) {
        win0 = sb / MT_DCKPT_BLOCK * MT_DCKPT_BLOCK;
        int64_t need = (span_end + MT_DCKPT_BLOCK - 1) / MT_DCKPT_BLOCK * MT_DCKPT_BLOCK;
        win1 = win0 + cap / MT_DCKPT_BLOCK * MT_DCKPT_BLOCK;
        if (win1 > need) win1 = need;
        if (win1 > p->nbytes) win1 = p->nbytes;
        rc = read_blocks(fd, path, t, p, win0, win1, buf, err, errlen);
        if (rc) break;
      }
      mt_dckpt_convert((char *)vdata + (size_t)s.ve * ves, v->dtype, buf + (sb - win0),
                       t->dtype, len);
      *covered += len;
      a += len;
    }
  }
  free(buf);
  return rc;
}
