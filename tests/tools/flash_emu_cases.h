/* tests/tools/flash_emu_cases.h — the double-precision reference and the
 * cases of flash_emu.cpp (same translation unit; see its header comment).
 *
 * Reference: naive loops over the FULL causal sequence (positions 0..s-1)
 * in double, from the same T-exact inputs: forward ctx and lse, backward
 * dqkv from dctx with D = sum_k P dP (equal to dctx . ctx); dropout keep =
 * mt_rng_uniform(key, ((sample * n_heads_total + head_offset + n) * s + q)
 * * s + k) >= p (core/rng.h).
 * Cases: plain calls (kv NULL) over shapes that hit every kernel branch,
 * document masking (mt_attn_desc.doc_start: keys before the query's document
 * start hidden) plain and over the ring, and
 * a context-parallel ring emulated on one device: cp ranks holding chunks r
 * and 2cp-1-r of 2cp (two-range positions), own block first (kv NULL), then
 * every other rank's K/V block through the kv form and attn_merge (fully
 * masked blocks included: their rows must merge as -inf/0), backward with
 * the final ctx and lse: dQ accumulated, dK/dV accumulated into per-owner
 * dkv buffers, then added to the owners' rows; the assembled full-sequence
 * results are compared with the reference. */
#include <stdio.h>

#include <vector>

struct Geo {
  int s, b, np, ng, npg, hn;
};
static size_t qkv_at(const Geo &g, int i, int bi, int grp, int slot, int d) {
  return ((((size_t)i * g.b + bi) * g.ng + grp) * (g.npg + 2) + slot) * g.hn + d;
}
static size_t row_len_qkv(const Geo &g) { return (size_t)g.b * g.ng * (g.npg + 2) * g.hn; }
static size_t row_len_ctx(const Geo &g) { return (size_t)g.b * g.np * g.hn; }

struct Params {
  float scale, p;
  mt_rng_key_t key;
  int64_t ids[8];
  int nht, hoff;
};

/* Document starts [b, s] (Megatron's reset_attention_mask): position p > 0
 * of row bi begins a document when a hash of (bi, p) falls below frac (the
 * op-case runner's rule, tests/unit/op_runners_flash.h). Empty: frac 0. */
static std::vector<int32_t> doc_starts(int b, int s, float frac) {
  std::vector<int32_t> ds;
  if (frac <= 0) return ds;
  ds.resize((size_t)b * s);
  for (int bi = 0; bi < b; bi++) {
    int32_t start = 0;
    for (int p = 0; p < s; p++) {
      uint32_t h = (uint32_t)(bi * 7919 + p) * 2654435761u;
      h ^= h >> 15;
      h *= 2246822519u;
      h ^= h >> 13;
      if (p > 0 && (double)h / 4294967296.0 < (double)frac) start = p;
      ds[(size_t)bi * s + p] = start;
    }
  }
  return ds;
}

/* ds: document starts (doc_starts) or empty: query i of row bi then sees
 * keys ds[bi * s + i] .. i. */
static void reference(const Geo &g, const Params &pr, const std::vector<float> &qkv,
                      const std::vector<float> &dctx, std::vector<double> &ctx,
                      std::vector<double> &lse, std::vector<double> &dqkv,
                      const std::vector<int32_t> &ds) {
  const int S = g.s, hn = g.hn;
  ctx.assign((size_t)S * row_len_ctx(g), 0.0);
  lse.assign((size_t)g.b * g.np * S, -INFINITY);
  dqkv.assign(qkv.size(), 0.0);
  std::vector<double> P(S), keep(S);
  for (int bi = 0; bi < g.b; bi++)
    for (int n = 0; n < g.np; n++) {
      const int grp = n / g.npg, j = n % g.npg;
      for (int i = 0; i < S; i++) {
        const int k0 = ds.empty() ? 0 : ds[(size_t)bi * S + i];
        const size_t qo = qkv_at(g, i, bi, grp, j, 0), co = ((size_t)i * g.b + bi) * g.np * hn + (size_t)n * hn;
        double mx = -INFINITY;
        for (int k = k0; k <= i; k++) {
          double acc = 0;
          for (int d = 0; d < hn; d++) acc += (double)qkv[qo + d] * qkv[qkv_at(g, k, bi, grp, g.npg, d)];
          P[k] = pr.scale * acc;
          mx = fmax(mx, P[k]);
        }
        double sum = 0;
        for (int k = k0; k <= i; k++) sum += exp(P[k] - mx);
        const double l = mx + log(sum);
        lse[((size_t)bi * g.np + n) * S + i] = l;
        for (int k = k0; k <= i; k++) {
          P[k] = exp(P[k] - l);
          keep[k] = 1.0;
          if (pr.p > 0) {
            const uint64_t c = (((uint64_t)pr.ids[bi] * pr.nht + pr.hoff + n) * S + i) * S + k;
            keep[k] = mt_rng_uniform(pr.key, c) >= pr.p ? 1.0 / (1.0 - pr.p) : 0.0;
          }
          for (int d = 0; d < hn; d++)
            ctx[co + d] += P[k] * keep[k] * qkv[qkv_at(g, k, bi, grp, g.npg + 1, d)];
        }
        /* backward of this row */
        double D = 0;
        std::vector<double> dP(i + 1);
        for (int k = k0; k <= i; k++) {
          double acc = 0;
          for (int d = 0; d < hn; d++) acc += (double)dctx[co + d] * qkv[qkv_at(g, k, bi, grp, g.npg + 1, d)];
          dP[k] = acc * keep[k];
          D += P[k] * dP[k];
        }
        for (int k = k0; k <= i; k++) {
          const double ds = P[k] * (dP[k] - D);
          for (int d = 0; d < hn; d++) {
            dqkv[qo + d] += pr.scale * ds * qkv[qkv_at(g, k, bi, grp, g.npg, d)];
            dqkv[qkv_at(g, k, bi, grp, g.npg, d)] += pr.scale * ds * qkv[qo + d];
            dqkv[qkv_at(g, k, bi, grp, g.npg + 1, d)] += P[k] * keep[k] * dctx[co + d];
          }
        }
      }
    }
}

/* ---- emulated device buffers (host memory, exact size) ---- */
static float round_t(float v, mt_dtype t) {
  if (t != MT_BF16) return v;
  uint32_t u;
  memcpy(&u, &v, 4);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return v;
  u += 0x7FFFu + ((u >> 16) & 1u);
  u &= 0xFFFF0000u;
  memcpy(&v, &u, 4);
  return v;
}
static void *dput(const std::vector<float> &h, mt_dtype t) {
  const size_t n = h.size(), es = t == MT_BF16 ? 2 : 4;
  void *p = malloc(n ? n * es : 1);
  for (size_t i = 0; i < n; i++) {
    const float v = round_t(h[i], t);
    if (t == MT_BF16) {
      uint32_t u;
      memcpy(&u, &v, 4);
      ((uint16_t *)p)[i] = (uint16_t)(u >> 16);
    } else {
      ((float *)p)[i] = v;
    }
  }
  return p;
}
static std::vector<float> dget(const void *p, size_t n, mt_dtype t) {
  std::vector<float> h(n);
  for (size_t i = 0; i < n; i++) {
    if (t == MT_BF16) {
      uint32_t u = (uint32_t)((const uint16_t *)p)[i] << 16;
      memcpy(&h[i], &u, 4);
    } else {
      h[i] = ((const float *)p)[i];
    }
  }
  return h;
}

static int g_fails, g_checks;
static void check(const char *what, const std::vector<float> &got, const std::vector<double> &want,
                  double tol, bool is_lse) {
  double mx = 0, err = 0;
  size_t worst = 0;
  bool bad = got.size() != want.size();
  for (size_t i = 0; !bad && i < got.size(); i++) {
    if (is_lse && (std::isinf(want[i]) || std::isinf(got[i]))) {
      if (want[i] != (double)got[i]) bad = true, worst = i;
      continue;
    }
    if (std::isnan(got[i])) {
      bad = true, worst = i;
      break;
    }
    mx = fmax(mx, fabs(want[i]));
    const double e = fabs(got[i] - want[i]);
    if (e > err) err = e, worst = i;
  }
  const double rel = is_lse ? err : err / (mx > 0 ? mx : 1);
  const bool ok = !bad && rel <= tol;
  g_checks++;
  g_fails += !ok;
  printf("  %-4s %-34s %s %.3e (tol %.1e)%s", ok ? "ok" : "FAIL", what,
         is_lse ? "max abs err" : "max err / max|ref|", rel, tol, bad ? " NaN/inf/size mismatch" : "");
  if (!ok && worst < got.size()) printf(" [at %zu: got %g want %g]", worst, got[worst], want[worst]);
  printf("\n");
}

struct Case {
  const char *name;
  int s, b, np, ng, hn;
  float p;
  int cp; /* 0: one plain call; >= 1: ring emulation over 2cp chunks */
  float docs; /* > 0: document masking, the fraction of document starts */
};

static unsigned long long g_seed = 12345;
static float urand() {
  g_seed = g_seed * 6364136223846793005ull + 1442695040888963407ull;
  return (float)((double)(g_seed >> 11) / 9007199254740992.0) * 2.0f - 1.0f;
}

/* Rows of a [S, row] tensor at the positions of CP rank r (chunks r, 2cp-1-r). */
static std::vector<float> take_rows(const std::vector<float> &x, size_t row, int c, int cp, int r) {
  std::vector<float> o;
  const int ch[2] = {r, 2 * cp - 1 - r};
  for (int h = 0; h < 2; h++)
    o.insert(o.end(), x.begin() + (size_t)ch[h] * c * row, x.begin() + (size_t)(ch[h] + 1) * c * row);
  return o;
}
static void put_rows(std::vector<float> &x, const std::vector<float> &part, size_t row, int c, int cp, int r) {
  const int ch[2] = {r, 2 * cp - 1 - r};
  for (int h = 0; h < 2; h++)
    std::copy(part.begin() + (size_t)h * c * row, part.begin() + (size_t)(h + 1) * c * row,
              x.begin() + (size_t)ch[h] * c * row);
}
/* K/V heads of a local qkv [L, b, ng, npg+2, hn] as kv [L, b, ng, 2, hn]. */
static std::vector<float> kv_of(const Geo &g, const std::vector<float> &q, int L) {
  std::vector<float> kv((size_t)L * g.b * g.ng * 2 * g.hn);
  for (int i = 0; i < L; i++)
    for (int bi = 0; bi < g.b; bi++)
      for (int grp = 0; grp < g.ng; grp++)
        for (int t = 0; t < 2; t++)
          for (int d = 0; d < g.hn; d++)
            kv[((((size_t)i * g.b + bi) * g.ng + grp) * 2 + t) * g.hn + d] = q[qkv_at(g, i, bi, grp, g.npg + t, d)];
  return kv;
}

static void run_case(mt_backend *be, const Case &cs) {
  const mt_dtype T = be->dtype;
  Geo g = {cs.s, cs.b, cs.np, cs.ng ? cs.ng : cs.np, 0, cs.hn};
  g.npg = g.np / g.ng;
  const int S = g.s;
  Params pr;
  pr.scale = 1.0f / sqrtf((float)g.hn);
  pr.p = cs.p;
  pr.key = mt_rng_key(777, "attention_dropout", 2, 0);
  for (int i = 0; i < 8; i++) pr.ids[i] = 3 + 5 * i;
  pr.nht = 2 * g.np;
  pr.hoff = g.np;
  const size_t rq = row_len_qkv(g), rc = row_len_ctx(g);
  std::vector<float> qkv((size_t)S * rq), dctx((size_t)S * rc);
  for (float &x : qkv) x = round_t(1.5f * urand(), T);
  for (float &x : dctx) x = round_t(urand(), T);
  std::vector<double> rctx, rlse, rdq;
  const std::vector<int32_t> ds = doc_starts(g.b, S, cs.docs);
  reference(g, pr, qkv, dctx, rctx, rlse, rdq, ds);

  mt_attn_desc d;
  memset(&d, 0, sizeof d);
  d.s = S, d.b = g.b, d.np = g.np, d.hn = g.hn, d.ng = g.ng;
  d.head_offset = pr.hoff, d.n_heads_total = pr.nht;
  d.scale = pr.scale, d.dropout_p = pr.p, d.key = pr.key, d.sample_ids = pr.ids;
  d.doc_start = ds.empty() ? NULL : ds.data(); /* [b, S] over the full sequence */
  std::vector<float> ctx((size_t)S * rc), lse((size_t)g.b * g.np * S), dq(qkv.size());
  std::vector<float> nan_q(qkv.size(), NAN), junk_c((size_t)S * rc, 7.0f);
  if (cs.cp == 0) {
    void *q = dput(qkv, T), *c = dput(junk_c, T), *dc = dput(dctx, T), *dqd = dput(nan_q, T);
    float *l = (float *)malloc(lse.size() * 4);
    cuda_flash_attn_fwd(be, &d, c, l, q, NULL);
    cuda_flash_attn_bwd(be, &d, dqd, NULL, dc, c, l, q, NULL);
    ctx = dget(c, ctx.size(), T);
    lse.assign(l, l + lse.size());
    dq = dget(dqd, dq.size(), T);
    free(q), free(c), free(dc), free(dqd), free(l);
  } else {
    const int cp = cs.cp, c = S / (2 * cp), L = 2 * c;
    const Geo gl = {L, g.b, g.np, g.ng, g.npg, g.hn};
    std::vector<void *> qd(cp), kvd(cp), cd(cp), dcd(cp), dqd(cp), dkvd(cp);
    std::vector<float *> ld(cp);
    std::vector<mt_attn_desc> dr(cp, d);
    const size_t nkv = (size_t)L * g.b * g.ng * 2 * g.hn, nl = (size_t)g.b * g.np * L;
    for (int r = 0; r < cp; r++) {
      std::vector<float> qr = take_rows(qkv, rq, c, cp, r);
      qd[r] = dput(qr, T);
      kvd[r] = dput(kv_of(gl, qr, L), T);
      cd[r] = dput(std::vector<float>((size_t)L * rc, 7.0f), T);
      dcd[r] = dput(take_rows(dctx, rc, c, cp, r), T);
      dqd[r] = dput(std::vector<float>((size_t)L * rq, NAN), T);
      dkvd[r] = dput(std::vector<float>(nkv, 0.0f), T);
      ld[r] = (float *)malloc(nl * 4);
      mt_attn_desc &e = dr[r];
      e.s = L, e.sq = L, e.sk = L, e.s_full = S;
      e.q_pos[0] = e.k_pos[0] = r * c;
      e.q_pos[1] = e.k_pos[1] = (2 * cp - 1 - r) * c;
      e.q_split = e.k_split = c;
    }
    for (int r = 0; r < cp; r++) { /* forward: own block, then the ring */
      cuda_flash_attn_fwd(be, &dr[r], cd[r], ld[r], qd[r], NULL);
      for (int step = 1; step < cp; step++) {
        const int r2 = (r - step + cp) % cp;
        mt_attn_desc e = dr[r];
        e.k_pos[0] = dr[r2].q_pos[0], e.k_pos[1] = dr[r2].q_pos[1];
        void *tc = dput(std::vector<float>((size_t)L * rc, 7.0f), T);
        float *tl = (float *)malloc(nl * 4);
        cuda_flash_attn_fwd(be, &e, tc, tl, qd[r], kvd[r2]);
        cuda_attn_merge(be, &dr[r], cd[r], ld[r], tc, tl);
        free(tc), free(tl);
      }
    }
    for (int r = 0; r < cp; r++) { /* backward with the final ctx, lse */
      cuda_flash_attn_bwd(be, &dr[r], dqd[r], NULL, dcd[r], cd[r], ld[r], qd[r], NULL);
      for (int step = 1; step < cp; step++) {
        const int r2 = (r - step + cp) % cp;
        mt_attn_desc e = dr[r];
        e.k_pos[0] = dr[r2].q_pos[0], e.k_pos[1] = dr[r2].q_pos[1];
        cuda_flash_attn_bwd(be, &e, dqd[r], dkvd[r2], dcd[r], cd[r], ld[r], qd[r], kvd[r2]);
      }
    }
    for (int r = 0; r < cp; r++) { /* assemble: dK/dV of the owner += ring contributions */
      std::vector<float> dqr = dget(dqd[r], (size_t)L * rq, T), dkv = dget(dkvd[r], nkv, T);
      for (int i = 0; i < L; i++)
        for (int bi = 0; bi < g.b; bi++)
          for (int grp = 0; grp < g.ng; grp++)
            for (int t = 0; t < 2; t++)
              for (int dd = 0; dd < g.hn; dd++)
                dqr[qkv_at(gl, i, bi, grp, g.npg + t, dd)] +=
                    dkv[((((size_t)i * g.b + bi) * g.ng + grp) * 2 + t) * g.hn + dd];
      put_rows(dq, dqr, rq, c, cp, r);
      put_rows(ctx, dget(cd[r], (size_t)L * rc, T), rc, c, cp, r);
      for (int h = 0; h < g.b * g.np; h++) { /* lse [b, np, L] -> [b, np, S] */
        for (int i = 0; i < L; i++) {
          const int pos = i < c ? r * c + i : (2 * cp - 1 - r) * c + (i - c);
          lse[(size_t)h * S + pos] = ld[r][(size_t)h * L + i];
        }
      }
      free(qd[r]), free(kvd[r]), free(cd[r]), free(dcd[r]), free(dqd[r]), free(dkvd[r]), free(ld[r]);
    }
  }
  const bool bf = T == MT_BF16;
  char nm[96];
  printf(" %s (s %d b %d np %d ng %d hn %d p %.1f%s%s)\n", cs.name, S, g.b, g.np, g.ng, g.hn,
         cs.p, cs.cp ? ", ring" : "", ds.empty() ? "" : ", documents");
  snprintf(nm, sizeof nm, "ctx");
  check(nm, ctx, rctx, bf ? 1.0 / 128 : 1e-5, false);
  check("lse", lse, rlse, bf ? 1e-3 : 2e-5, true);
  check("dqkv", dq, rdq, bf ? 1.0 / 128 : 1e-5, false);
}

/* cuda/cuda_philox4.cuh: every element visited exactly once, with the
 * uniform of its own counter (mt_rng_uniform), for row bases of every
 * alignment, row lengths around the 4- and 128-element boundaries and
 * causal limits; the hidden dropout's items over TP shards with unaligned
 * offsets. */
static void philox4_check(void) {
  const mt_rng_key_t key = mt_rng_key(7, "attention_dropout", 3, 0);
  int bad = 0;
  for (uint64_t base = 0; base < 9; base++)
    for (int64_t n = 0; n < 270; n += 7)
      for (int64_t nr = 0; nr <= n; nr += 13) {
        std::vector<int> seen((size_t)n, 0);
        const uint64_t b0 = base * 1000003;
        for (int lane = 0; lane < 32; lane++)
          row_uniform4(key, b0, n, nr, lane, [&](int64_t k, float u) {
            seen[(size_t)k]++;
            if (k < nr && u != mt_rng_uniform(key, b0 + (uint64_t)k)) bad++;
          });
        for (int v : seen) bad += v != 1;
      }
  for (int64_t h = 1; h < 19; h++)
    for (int64_t hoff = 0; hoff < 5; hoff++) {
      drop_args a;
      a.p = 0.3f, a.inv = 1.0f / 0.7f, a.key = key;
      a.s = 3, a.b = 2, a.h = h, a.s_offset = 1, a.s_full = 7, a.h_offset = hoff;
      a.h_full = h + hoff + 3;
      const int64_t ids[2] = {5, 2};
      std::vector<int> seen((size_t)(a.s * a.b * h), 0);
      for (int64_t it = 0; it < a.s * a.b * drop_groups(a); it++)
        drop_item(a, ids, it, [&](int64_t i, bool keep) {
          seen[(size_t)i]++;
          const int64_t r = i / a.h, j = i - r * a.h, si = r / a.b, bi = r - si * a.b;
          const uint64_t ctr = ((uint64_t)ids[bi] * (uint64_t)a.s_full + (uint64_t)(a.s_offset + si)) *
                                   (uint64_t)a.h_full + (uint64_t)(a.h_offset + j);
          if (keep != (mt_rng_uniform(a.key, ctr) >= a.p)) bad++;
        });
      for (int v : seen) bad += v != 1;
    }
  g_checks++;
  g_fails += bad != 0;
  printf("  %-4s philox4: softmax rows and hidden dropout items, %d wrong visits or values\n",
         bad ? "FAIL" : "ok", bad);
}

#include "flash_emu_vdim.h"

int main(int argc, char **argv) {
  static const Case cases[] = {
      {"plain", 13, 2, 3, 0, 6, 0.0f, 0, 0},
      {"plain, dropout", 13, 2, 3, 0, 6, 0.3f, 0, 0},
      {"GQA ng=2, dropout", 37, 1, 4, 2, 8, 0.2f, 0, 0},
      {"MQA", 37, 1, 4, 1, 8, 0.0f, 0, 0},
      {"s = 1", 1, 3, 2, 2, 5, 0.0f, 0, 0},
      {"tiles, hn 64, dropout", 130, 1, 2, 1, 64, 0.1f, 0, 0},
      {"hn 80 (padded to 128)", 70, 1, 2, 2, 80, 0.0f, 0, 0},
      {"hn 16", 100, 2, 2, 2, 16, 0.0f, 0, 0},
      {"hn 160 (FFMA kernels)", 20, 1, 1, 1, 160, 0.2f, 0, 0},
      {"cp 2, GQA, dropout", 48, 2, 4, 2, 16, 0.2f, 2, 0},
      {"cp 3, dropout", 72, 1, 2, 1, 32, 0.1f, 3, 0},
      {"cp 2, chunks across tiles", 264, 1, 1, 1, 64, 0.0f, 2, 0},
      {"documents, dropout", 13, 2, 3, 0, 6, 0.3f, 0, 0.25f},
      {"documents, tiles, hn 64, dropout", 130, 1, 2, 1, 64, 0.1f, 0, 0.03f},
      {"documents, GQA, hn 16", 100, 2, 4, 2, 16, 0.2f, 0, 0.05f},
      {"documents, cp 2, GQA, dropout", 48, 2, 4, 2, 16, 0.2f, 2, 0.1f},
      {"documents, cp 3, dropout", 72, 1, 2, 1, 32, 0.1f, 3, 0.05f},
  };
  const char *filter = argc > 1 ? argv[1] : "";
  cuda_impl im;
  memset(&im, 0, sizeof im);
  mt_backend be;
  memset(&be, 0, sizeof be);
  be.impl = &im;
  be.name = "cuda (host emulation)";
  static const char *mode_name[3] = {"fp32 storage (FFMA kernels)", "bf16 storage (mma.sync kernels)",
                                     "bf16 storage, MEGATRAIN_CUDA_FLASH_SIMT=1 (FFMA kernels)"};
  for (int mode = 0; mode < 3; mode++) {
    be.dtype = mode ? MT_BF16 : MT_F32;
    im.flash_simt = mode == 2;
    printf("== %s\n", mode_name[mode]);
    for (const Case &cs : cases)
      if (strstr(cs.name, filter)) run_case(&be, cs);
    /* hv != hn always runs the FFMA kernels: bf16 with the SIMT switch (mode 2)
     * is the same path as mode 1 for these cases */
    if (mode != 2 && strstr("value width hv != hn", filter)) vdim_cases(&be);
  }
  printf("== dropout masks four per Philox call\n");
  philox4_check();
  for (void *p : g_ws) free(p);
  printf("flash_emu: %d checks, %d failed\n", g_checks, g_fails);
  return g_fails ? 1 : 0;
}
