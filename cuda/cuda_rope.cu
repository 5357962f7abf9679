/* cuda/cuda_rope.cu — rotary position embedding (Su et al. 2021, RoFormer;
 * Megatron-core rotary_pos_embedding.py) on the CUDA backend, forward and
 * backward (the inverse rotation), in place on the q and k heads of the GQA
 * qkv layout, op-table entries included (spec: core/backend.h mt_rope_desc;
 * reference semantics: cpu/cpu_rope.c). The angles are computed in double
 * precision on the device (pos * base^(-2i/rot_dim), then sin/cos rounded
 * to float; Llama-3.1 / YaRN frequencies and YaRN's cos/sin factor from
 * core/rope_freq.h), like cpu/'s host table. One thread per rotated pair. */
#include "core/rope_freq.h"
#include "cuda_dev.cuh"

#define TPB 256

/* ---- rotary embedding (Su et al. 2021) ---- */

struct rope_args {
  int64_t b, ng, npg, hn, half, s_offset;
  int interleaved;
  mt_rope_freq freq; /* core/rope_freq.h */
  double mscale;     /* YaRN's factor on cos and sin (1 otherwise) */
  float sign;
};

/* One thread per (si, bi, g, slot <= npg, i < half): rotate the pair of
 * channels (a, b) of that q/k head by sign * theta. */
template <typename T> __global__ void k_rope(rope_args a, T *x, int64_t n) {
  for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < n;
       t += (int64_t)gridDim.x * blockDim.x) {
    const int64_t i = t % a.half, hs = t / a.half; /* hs = (u, slot), slot <= npg */
    const int64_t slot = hs % (a.npg + 1), u = hs / (a.npg + 1);
    const int64_t si = u / (a.b * a.ng);
    const double th = (double)(a.s_offset + si) * mt_rope_inv_freq(&a.freq, (int)i);
    double sd, cd;
    sincos(th, &sd, &cd);
    const float c = (float)(cd * a.mscale), s = a.sign * (float)(sd * a.mscale);
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
  rope_args a;
  a.b = d->b;
  a.ng = ng;
  a.npg = d->np / ng;
  a.hn = d->hn;
  a.half = d->rot_dim / 2;
  a.s_offset = d->s_offset;
  a.interleaved = d->interleaved;
  a.freq = mt_rope_freq_make(d->scaling, (double)d->base, d->rot_dim, (double)d->factor,
                             d->original_max, (double)d->beta_fast, (double)d->beta_slow);
  a.mscale = d->attn_factor != 0.0f ? (double)d->attn_factor : 1.0;
  a.sign = sign;
  const int64_t n = (int64_t)d->s * d->b * ng * (a.npg + 1) * a.half;
  if (n <= 0) return;
  cudaStream_t st = cuda_impl_of(be)->stream;
  MT_DISPATCH(be->dtype, (MT_LAUNCH(k_rope<T>, grid_for(n, TPB), TPB, 0, st)(a, (T *)x, n)));
  MT_CUDA_LAUNCHED();
}

extern "C" void cuda_rope_fwd(mt_backend *be, const mt_rope_desc *d, void *qkv) {
  rope_launch(be, d, qkv, 1.0f);
}

extern "C" void cuda_rope_bwd(mt_backend *be, const mt_rope_desc *d, void *dqkv) {
  rope_launch(be, d, dqkv, -1.0f);
}
