/* cuda/cuda_rope.cu — rotary position embedding (Su et al. 2021, RoFormer;
 * Megatron-core rotary_pos_embedding.py) on the CUDA backend, forward and
 * backward (the inverse rotation), in place on the q and k heads of the GQA
 * qkv layout, op-table entries included (spec: core/backend.h mt_rope_desc;
 * reference semantics: cpu/cpu_rope.c).
 *
 * cos/sin table per position (issue 32): tab = {cos [P, half], sin [P,
 * half]} of positions 0 .. P-1, entry (p, i) = (float)(cos(p · inv_i) · m)
 * and (float)(sin(p · inv_i) · m), the angle in double precision
 * (Llama-3.1 / YaRN frequencies inv_i and YaRN's factor m from
 * core/rope_freq.h), rounded once to float: exactly what the per-element
 * kernel computed before and what cpu/'s host table holds. The table is
 * cached in the backend context (cuda_impl.rope_*) for the frequency
 * parameters of the last call and rebuilt when they change or a call needs
 * a position past P (P then grows to a power of two, so generation's
 * growing positions rebuild it O(log) times); the rotation kernel reads
 * two floats per pair from it (L2-resident: 512 KiB at s = 1024, half = 64)
 * instead of one double pow and sincos per pair. One thread per rotated
 * pair. */
#include "core/rope_freq.h"
#include "cuda_dev.cuh"

#define TPB 256

/* ---- the cos/sin table ---- */

/* tab[p * half + i] = cos, tab[P * half + p * half + i] = sin, p < P. */
__global__ void k_rope_table(float *tab, mt_rope_freq f, double mscale, int64_t half, int64_t P) {
  const int64_t n = P * half;
  for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < n;
       t += (int64_t)gridDim.x * blockDim.x) {
    const int64_t i = t % half, p = t / half;
    const double th = (double)p * mt_rope_inv_freq(&f, (int)i);
    double sd, cd;
    sincos(th, &sd, &cd);
    tab[t] = (float)(cd * mscale);
    tab[n + t] = (float)(sd * mscale);
  }
}

/* Same frequencies, factor and pair count as the cached table. */
static int rope_key_eq(const cuda_impl *im, const mt_rope_freq *f, double mscale, int64_t half) {
  const mt_rope_freq *k = &im->rope_freq;
  return im->rope_tab && k->kind == f->kind && k->base == f->base && k->dim == f->dim &&
         k->factor == f->factor && k->lo == f->lo && k->hi == f->hi && im->rope_mscale == mscale &&
         im->rope_half == half;
}

/* The table covering positions [0, need) for these parameters (built or
 * rebuilt on the stream when the cached one does not fit). */
static const float *rope_table(mt_backend *be, const mt_rope_freq *f, double mscale, int64_t half,
                               int64_t need) {
  cuda_impl *im = cuda_impl_of(be);
  if (rope_key_eq(im, f, mscale, half) && need <= im->rope_pos) return (const float *)im->rope_tab;
  int64_t P = 256;
  while (P < need) P *= 2;
  if (im->rope_tab) cuda_free(be, im->rope_tab); /* stream-ordered: queued readers run first */
  im->rope_tab = cuda_alloc(be, (size_t)(2 * P * half) * sizeof(float), MT_MEM_WORKSPACE);
  im->rope_freq = *f;
  im->rope_mscale = mscale;
  im->rope_half = half;
  im->rope_pos = P;
  MT_LAUNCH(k_rope_table, grid_for(P * half, TPB), TPB, 0, im->stream)
  ((float *)im->rope_tab, *f, mscale, half, P);
  MT_CUDA_LAUNCHED();
  return (const float *)im->rope_tab;
}

/* ---- rotary embedding (Su et al. 2021) ---- */

struct rope_args {
  int64_t b, ng, npg, hn, half, s_offset, P;
  int interleaved;
  float sign;
};

/* One thread per (si, bi, g, slot <= npg, i < half): rotate the pair of
 * channels (a, b) of that q/k head by sign * theta (cos/sin of position
 * s_offset + si from tab). */
template <typename T> __global__ void k_rope(rope_args a, const float *tab, T *x, int64_t n) {
  for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < n;
       t += (int64_t)gridDim.x * blockDim.x) {
    const int64_t i = t % a.half, hs = t / a.half; /* hs = (u, slot), slot <= npg */
    const int64_t slot = hs % (a.npg + 1), u = hs / (a.npg + 1);
    const int64_t e = (a.s_offset + u / (a.b * a.ng)) * a.half + i;
    const float c = tab[e], s = a.sign * tab[a.P * a.half + e];
    T *h = x + (u * (a.npg + 2) + slot) * a.hn;
    const int64_t ia = a.interleaved ? 2 * i : i, ib = a.interleaved ? 2 * i + 1 : i + a.half;
    const float va = to_f(h[ia]), vb = to_f(h[ib]);
    h[ia] = from_f<T>(va * c - vb * s);
    h[ib] = from_f<T>(vb * c + va * s);
  }
}

static void rope_launch(mt_backend *be, const mt_rope_desc *d, void *x, float sign) {
  const int ng = d->ng > 0 ? d->ng : d->np;
  MT_ASSERT(d->np % ng == 0 && d->rot_dim % 2 == 0 && d->rot_dim >= 0 && d->rot_dim <= d->hn);
  MT_ASSERT(d->s_offset >= 0);
  rope_args a;
  a.b = d->b;
  a.ng = ng;
  a.npg = d->np / ng;
  a.hn = d->hn;
  a.half = d->rot_dim / 2;
  a.s_offset = d->s_offset;
  a.interleaved = d->interleaved;
  a.sign = sign;
  const int64_t n = (int64_t)d->s * d->b * ng * (a.npg + 1) * a.half;
  if (n <= 0) return;
  const mt_rope_freq f =
      mt_rope_freq_make(d->scaling, (double)d->base, d->rot_dim, (double)d->factor,
                        d->original_max, (double)d->beta_fast, (double)d->beta_slow);
  const double mscale = d->attn_factor != 0.0f ? (double)d->attn_factor : 1.0;
  const float *tab = rope_table(be, &f, mscale, a.half, (int64_t)d->s_offset + d->s);
  a.P = cuda_impl_of(be)->rope_pos;
  cudaStream_t st = cuda_impl_of(be)->stream;
  MT_DISPATCH(be->dtype, (MT_LAUNCH(k_rope<T>, grid_for(n, TPB), TPB, 0, st)(a, tab, (T *)x, n)));
  MT_CUDA_LAUNCHED();
}

extern "C" void cuda_rope_fwd(mt_backend *be, const mt_rope_desc *d, void *qkv) {
  rope_launch(be, d, qkv, 1.0f);
}

extern "C" void cuda_rope_bwd(mt_backend *be, const mt_rope_desc *d, void *dqkv) {
  rope_launch(be, d, dqkv, -1.0f);
}
