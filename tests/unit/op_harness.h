/* tests/unit/op_harness.h — the ggml-style op-case harness (test-backend-ops):
 * one table of cases {op, output, shape, dtype, tolerance} (op_cases.h) run
 * on every compiled backend.
 *
 *   cpu column:  the cpu backend (fp32) against a double-precision reference
 *                (naive loops for forward ops, central finite differences of
 *                the double forward for nonlinear backward ops);
 *   cuda column: the cuda backend (fp32 and bf16 storage) against the cpu
 *                backend on identical inputs (rounded to bf16 for bf16 rows);
 *                skipped with a message when no GPU is usable.
 *   cpu-bf16 column: the bf16 rows on the cpu backend with bf16 storage
 *                against the cpu fp32 backend on the same bf16-exact inputs,
 *                within the cuda bf16 tolerances, and bitwise the fp32 result
 *                rounded once (ot_round_once).
 *
 * A case's runner creates its inputs from a per-case seed (so both backends
 * see the same values), runs the op and registers every output (host copy of
 * the result, optional double reference, optional base for accumulating
 * ops: the reference column then checks the increment). A failure line names
 * the op, the output, the shape, the dtype, the backend and the error (max
 * abs / rel error and the worst index with its values).
 * Header-only: each test binary is one translation unit. */
#ifndef MT_TESTS_OP_HARNESS_H
#define MT_TESTS_OP_HARNESS_H

#include <math.h>
#include <omp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/registry.h"
#include "core/dtype.h"
#include "core/rng.h"

/* Limit per element: atol + rtol * |want_i| + mtol * max_i |want_i|.
 * {0, 0, 0} = bitwise (NaN always fails). */
typedef struct {
  double rtol, atol, mtol;
} ot_tol;

enum {
  OT_DET = 1,  /* cpu: bitwise the same with 1 OpenMP thread and repeated */
  OT_MASK = 2, /* cuda: identical zero pattern (dropout masks) */
  OT_CPU = 4,  /* cpu column only (no cuda counterpart worth comparing) */
  OT_CHAIN = 8, /* the runner chains several ops (bf16 intermediates rounded
                 * between them): cpu-bf16 is not one rounding of fp32 */
};

/* One row of the table. ne: the op's shape (meaning documented per runner);
 * ip/fp: integer and float parameters (flags, alpha/beta, dropout p). */
typedef struct op_case {
  const char *op, *out;
  int64_t ne[4];
  int ip[6];
  float fp[5];
  mt_dtype dtype;     /* storage dtype T of the backend under test */
  ot_tol tol;         /* cpu vs double reference (fp32 rows) */
  ot_tol tolg;        /* cuda vs cpu */
  int flags;
} op_case;

/* A tensor on one backend: host values h (fp32, bf16-exact for bf16 rows),
 * device copy d stored in dtype t. */
typedef struct {
  int64_t n;
  mt_dtype t;
  float *h;
  void *d;
} ot_t;

#define OT_MAX_OUT 12
#define OT_MAX_T 24
typedef struct {
  const char *name;
  int64_t n;
  double *got;       /* result (downloaded and widened) */
  double *want;      /* double reference, or NULL when not computed */
  double *base;      /* initial values of an accumulating output, or NULL */
} ot_out;

/* State of one runner call. */
typedef struct {
  const op_case *c;
  mt_backend *be;
  mt_dtype T;        /* device storage dtype (fp32 on cpu) */
  int bf16_inputs;   /* round host inputs to bf16 (bf16 rows, both columns) */
  int want_ref;      /* compute the double reference */
  uint64_t seed;
  ot_t ts[OT_MAX_T];
  int nt;
  void *ints[OT_MAX_T];
  int ni;
  ot_out outs[OT_MAX_OUT];
  int no;
  char fail[512];    /* property failure reported by the runner itself */
} ot_run;

typedef void (*ot_runner)(ot_run *r);

/* bf16 <-> fp32: the tree's one conversion (core/dtype.h). */
static inline uint16_t ot_f2bf(float f) { return mt_f32_to_bf16(f); }
static inline float ot_bf2f(uint16_t b) { return mt_bf16_to_f32(b); }

/* xorshift64* uniform in [lo, hi) */
static inline double ot_rand(ot_run *r, double lo, double hi) {
  r->seed ^= r->seed >> 12;
  r->seed ^= r->seed << 25;
  r->seed ^= r->seed >> 27;
  uint64_t x = r->seed * 0x2545F4914F6CDD1Dull;
  return lo + (hi - lo) * (double)(x >> 11) * (1.0 / 9007199254740992.0);
}

static inline void ot_put(ot_run *r, ot_t *t) {
  size_t n = (size_t)t->n;
  if (t->t == MT_BF16) {
    uint16_t *b = malloc(n * 2 + 2);
    for (size_t i = 0; i < n; i++) b[i] = ot_f2bf(t->h[i]);
    r->be->ops->memcpy_h2d(r->be, t->d, b, n * 2);
    free(b);
  } else {
    r->be->ops->memcpy_h2d(r->be, t->d, t->h, n * 4);
  }
}

static inline float *ot_get(ot_run *r, const ot_t *t) {
  size_t n = (size_t)t->n;
  float *o = malloc(n * 4 + 4);
  if (t->t == MT_BF16) {
    uint16_t *b = malloc(n * 2 + 2);
    r->be->ops->memcpy_d2h(r->be, b, t->d, n * 2);
    for (size_t i = 0; i < n; i++) o[i] = ot_bf2f(b[i]);
    free(b);
  } else {
    r->be->ops->memcpy_d2h(r->be, o, t->d, n * 4);
  }
  return o;
}

/* New tensor of n elements in dtype t (MT_F32, or r->T for "T" tensors) with
 * values U(lo, hi), rounded to bf16 when the row's inputs are. */
static inline ot_t *ot_rnd(ot_run *r, int64_t n, mt_dtype t, double lo, double hi) {
  if (r->nt >= OT_MAX_T) { snprintf(r->fail, sizeof r->fail, "harness: too many tensors"); abort(); }
  ot_t *x = &r->ts[r->nt++];
  x->n = n;
  x->t = t;
  x->h = malloc((size_t)n * 4 + 4);
  for (int64_t i = 0; i < n; i++) {
    float v = (float)ot_rand(r, lo, hi);
    x->h[i] = r->bf16_inputs ? ot_bf2f(ot_f2bf(v)) : v;
  }
  x->d = r->be->ops->alloc(r->be, (size_t)(n ? n : 1) * mt_dtype_size(t), MT_MEM_ACT);
  ot_put(r, x);
  return x;
}

/* Overwrite a tensor's host values (rounded like inputs) and upload them. */
static inline void ot_set(ot_run *r, ot_t *x, int64_t i, float v) {
  x->h[i] = r->bf16_inputs ? ot_bf2f(ot_f2bf(v)) : v;
}

/* int32 device array with host values v. */
static inline int32_t *ot_ints(ot_run *r, const int32_t *v, int64_t n) {
  int32_t *d = r->be->ops->alloc(r->be, (size_t)(n ? n : 1) * 4, MT_MEM_ACT);
  r->be->ops->memcpy_h2d(r->be, d, v, (size_t)n * 4);
  r->ints[r->ni++] = d;
  return d;
}

static inline double *ot_dbl(int64_t n) { return calloc((size_t)(n ? n : 1), sizeof(double)); }

/* Register output `name`: downloads x; want (owned) may be NULL when the
 * reference is not computed; base (copied) = initial host values of an
 * accumulating output (the reference column then checks the increment). */
static inline void ot_output(ot_run *r, const char *name, const ot_t *x, double *want,
                             const float *base) {
  ot_out *o = &r->outs[r->no++];
  float *g = ot_get(r, x);
  o->name = name;
  o->n = x->n;
  o->got = ot_dbl(x->n);
  for (int64_t i = 0; i < x->n; i++) o->got[i] = g[i];
  free(g);
  o->want = r->want_ref ? want : (free(want), NULL);
  o->base = NULL;
  if (base) {
    o->base = ot_dbl(x->n);
    for (int64_t i = 0; i < x->n; i++) o->base[i] = base[i];
  }
}

/* Register a scalar output (reductions returning a double to the host). */
static inline void ot_output_scalar(ot_run *r, const char *name, double got, double want) {
  ot_out *o = &r->outs[r->no++];
  o->name = name;
  o->n = 1;
  o->got = ot_dbl(1);
  o->got[0] = got;
  o->want = NULL;
  if (r->want_ref) {
    o->want = ot_dbl(1);
    o->want[0] = want;
  }
  o->base = NULL;
}

/* Runner-detected property failure (aliasing, untouched padding, ...). */
static inline void ot_failf(ot_run *r, const char *fmt, ...) {
  if (r->fail[0]) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->fail, sizeof r->fail, fmt, ap);
  va_end(ap);
}

static inline void ot_release(ot_run *r) {
  for (int i = 0; i < r->nt; i++) {
    free(r->ts[i].h);
    r->be->ops->free(r->be, r->ts[i].d);
  }
  for (int i = 0; i < r->ni; i++) r->be->ops->free(r->be, r->ints[i]);
  for (int i = 0; i < r->no; i++) free(r->outs[i].got), free(r->outs[i].want), free(r->outs[i].base);
  r->nt = r->ni = r->no = 0;
}

static inline void ot_shape_str(const op_case *c, char *buf, size_t len) {
  int k = 4;
  while (k > 1 && c->ne[k - 1] == 0) k--;
  int w = snprintf(buf, len, "[");
  for (int i = 0; i < k && w < (int)len; i++)
    w += snprintf(buf + w, len - (size_t)w, "%s%lld", i ? ", " : "", (long long)c->ne[i]);
  if (w < (int)len)
    snprintf(buf + w, len - (size_t)w, "] ip=[%d, %d, %d, %d] fp=[%g, %g]", c->ip[0], c->ip[1],
             c->ip[2], c->ip[3], (double)c->fp[0], (double)c->fp[1]);
}

static inline const ot_out *ot_find(const ot_run *r, const char *name) {
  for (int i = 0; i < r->no; i++)
    if (!strcmp(r->outs[i].name, name)) return &r->outs[i];
  return NULL;
}

/* Compare o->got against want[] (reference column: both minus o->base) or
 * against ref->got (cuda column). Returns 0 and prints the failure line when
 * the tolerance is exceeded (mask: zero patterns must also agree). */
static inline int ot_compare(const op_case *c, const char *backend, const ot_out *o,
                             const ot_out *ref, ot_tol tol, int mask) {
  int64_t n = o->n;
  const double *base = ref ? NULL : o->base, *wv = ref ? ref->got : o->want;
  double mx = 0;
  for (int64_t i = 0; i < n; i++) mx = fmax(mx, fabs(wv[i] - (base ? base[i] : 0.0)));
  int64_t bad = -1, zdiff = 0;
  double worst = 0, max_abs = 0, max_rel = 0, bw = 0, bg = 0;
  for (int64_t i = 0; i < n; i++) {
    double w = wv[i] - (base ? base[i] : 0.0), g = o->got[i] - (base ? base[i] : 0.0);
    double e = fabs(g - w), lim = tol.atol + tol.rtol * fabs(w) + tol.mtol * mx;
    if (isnan(e)) e = INFINITY;
    max_abs = fmax(max_abs, e);
    if (w != 0) max_rel = fmax(max_rel, e / fabs(w));
    if (mask && ((o->got[i] == 0) != (wv[i] == 0))) zdiff++;
    double q = e / (lim > 0 ? lim : 1e-300);
    if (!(e <= lim) && (bad < 0 || q > worst)) bad = i, worst = q, bw = w, bg = g;
  }
  if (bad < 0 && zdiff == 0) return 1;
  char sh[160];
  ot_shape_str(c, sh, sizeof sh);
  printf("FAIL op=%s out=%s shape=%s dtype=%s backend=%s: max abs err %.3e, max rel err %.3e",
         c->op, o->name, sh, mt_dtype_name(c->dtype), backend, max_abs, max_rel);
  if (bad >= 0)
    printf(", worst index %lld got %.9g want %.9g (err/limit %.3g; rtol %.1e atol %.1e "
           "mtol %.1e, max|want| %.3g)",
           (long long)bad, bg, bw, worst, tol.rtol, tol.atol, tol.mtol, mx);
  if (zdiff) printf(", zero pattern differs at %lld elements", (long long)zdiff);
  printf("\n");
  return 0;
}

/* Run one case on backend be (storage T); the caller releases r. */
static inline void ot_exec(ot_run *r, const op_case *c, ot_runner fn, mt_backend *be,
                           mt_dtype T, int want_ref, uint64_t seed) {
  memset(r, 0, sizeof *r);
  r->c = c;
  r->be = be;
  r->T = T;
  r->bf16_inputs = c->dtype == MT_BF16;
  r->want_ref = want_ref;
  r->seed = seed;
  fn(r);
  be->ops->synchronize(be);
}

static inline int ot_report_fail(const op_case *c, const char *backend, const ot_run *r) {
  if (!r->fail[0]) return 1;
  char sh[160];
  ot_shape_str(c, sh, sizeof sh);
  printf("FAIL op=%s out=%s shape=%s dtype=%s backend=%s: %s\n", c->op, c->out, sh,
         mt_dtype_name(c->dtype), backend, r->fail);
  return 0;
}

static inline int ot_outputs_bitwise(const op_case *c, const ot_out *a, const ot_out *b,
                                     const char *what) {
  if (b && memcmp(a->got, b->got, (size_t)a->n * sizeof(double)) == 0) return 1;
  char sh[160];
  ot_shape_str(c, sh, sizeof sh);
  printf("FAIL op=%s out=%s shape=%s dtype=%s backend=cpu: not bitwise identical %s\n", c->op,
         a->name, sh, mt_dtype_name(c->dtype), what);
  return 0;
}

/* cpu column of one case: 1 = pass. */
static inline int ot_case_cpu(mt_backend *cpu, const op_case *c, ot_runner fn, uint64_t seed) {
  ot_run r, r1;
  ot_exec(&r, c, fn, cpu, MT_F32, 1, seed);
  int ok = ot_report_fail(c, "cpu", &r);
  const ot_out *o = ot_find(&r, c->out);
  if (!o || !o->want) {
    printf("FAIL op=%s out=%s: the runner has no such output with a reference\n", c->op, c->out);
    ok = 0;
  } else {
    ok &= ot_compare(c, "cpu", o, NULL, c->tol, 0);
  }
  if (ok && (c->flags & OT_DET)) {
    for (int pass = 0; pass < 2 && ok; pass++) {
      int nt = omp_get_max_threads();
      if (pass) omp_set_num_threads(1);
      ot_exec(&r1, c, fn, cpu, MT_F32, 0, seed);
      omp_set_num_threads(nt);
      ok &= ot_outputs_bitwise(c, o, ot_find(&r1, c->out), pass ? "with 1 thread" : "on repeat");
      ot_release(&r1);
    }
  }
  ot_release(&r);
  return ok;
}

/* 1 when every element of o (a bf16-storage backend's output) is the cpu
 * fp32 result ref rounded once to bf16 (T outputs) or equal to it (fp32
 * outputs); else 0 with a failure line naming the first element that is
 * neither. */
static inline int ot_round_once(const op_case *c, const char *backend, const ot_out *o,
                                const ot_out *ref) {
  for (int64_t i = 0; i < o->n; i++) {
    const double f = ref->got[i], r = (double)ot_bf2f(ot_f2bf((float)f)), g = o->got[i];
    if (g == f || g == r || (isnan(g) && isnan(f))) continue;
    char sh[160];
    ot_shape_str(c, sh, sizeof sh);
    printf("FAIL op=%s out=%s shape=%s dtype=%s backend=%s: not the fp32 result rounded once "
           "at index %lld: got %.9g, fp32 %.9g, fp32 rounded to bf16 %.9g\n",
           c->op, o->name, sh, mt_dtype_name(c->dtype), backend, (long long)i, g, f, r);
    return 0;
  }
  return 1;
}

/* Column `backend` of one case: the op on be (storage c->dtype: the cuda
 * backends, or the cpu backend with bf16 storage) against the cpu fp32
 * backend on the same inputs, within c->tolg (masks: the zero pattern too).
 * round_once (cpu bf16): also every output must be bitwise the fp32 result
 * rounded once (ot_round_once): cpu/'s bf16 ops are the fp32 ops on widened
 * inputs with one rounding per output. */
static inline int ot_case_vs_cpu(mt_backend *cpu, mt_backend *be, const char *backend,
                                 const op_case *c, ot_runner fn, uint64_t seed, int round_once) {
  ot_run rc, rg;
  ot_exec(&rc, c, fn, cpu, MT_F32, 0, seed);
  ot_exec(&rg, c, fn, be, c->dtype, 0, seed);
  int ok = ot_report_fail(c, backend, &rg);
  const ot_out *oc = ot_find(&rc, c->out), *og = ot_find(&rg, c->out);
  if (ok && oc && og) {
    ok = ot_compare(c, backend, og, oc, c->tolg, (c->flags & OT_MASK) != 0);
    if (ok && round_once) ok = ot_round_once(c, backend, og, oc);
  }
  ot_release(&rc);
  ot_release(&rg);
  return ok;
}

/* cuda column of one case: the op on gpu (storage c->dtype) against cpu. */
static inline int ot_case_gpu(mt_backend *cpu, mt_backend *gpu, const op_case *c, ot_runner fn,
                              uint64_t seed) {
  return ot_case_vs_cpu(cpu, gpu, "cuda", c, fn, seed, 0);
}

#endif
