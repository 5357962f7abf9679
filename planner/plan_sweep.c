/* planner/plan_sweep.c — `megatrain plan --sweep`: enumerate layouts of one
 * model on a world size and rank the ones that fit by predicted tokens/s.
 *
 * Each candidate is the user's config with the layout keys overridden and
 * re-validated by mt_config_load_saved (the same rules training applies; a
 * key of the base that the layout switches off, such as
 * recompute_num_layers without full recomputation, is dropped), so every
 * listed layout is one `--set` list away from a run: the layout keys, and
 * "KEY=null" for a key of the user's config the layout switches off.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "planner/plan.h"
#include "planner/plan_internal.h"

enum { MAX_SETS = 24 };
typedef struct {
  mt_plan p;
  char sets[MAX_SETS][96];
  int n_sets;
} cand;

static int by_throughput(const void *a, const void *b) {
  const cand *x = a, *y = b;
  if (x->p.mem.fits != y->p.mem.fits) return y->p.mem.fits - x->p.mem.fits;
  double d = y->p.time.tokens_per_s - x->p.time.tokens_per_s;
  return d > 0 ? 1 : d < 0 ? -1 : 0;
}

static const char *k_rc[3] = {"", "selective", "full"};

typedef struct {
  const mt_config *base;
  int world;
  const mt_hardware *hw;
  const mt_plan_options *opt;
  cand *c;
  size_t n, cap;
  long tried;
} sweep_state;

/* Validate and plan one layout (the config with its keys overridden); a
 * valid one is appended to st->c. */
static void try_layout(sweep_state *st, int tp, int cp, int pp, int v, int mbs, int ep, int etp,
                       int rc, int zero) {
  cand k;
  memset(&k, 0, sizeof k);
  const char *ov[MAX_SETS];
  char e2[1024];
  const int moe = st->base->model.num_experts > 0;
  int n = 0;
  /* only keys that apply to the layout: another would be refused ("null" is
   * derive, or leave out) */
  snprintf(k.sets[n++], 96, "parallel.tensor_model_parallel_size=%d", tp);
  snprintf(k.sets[n++], 96, "parallel.pipeline_model_parallel_size=%d", pp);
  if (pp > 1) snprintf(k.sets[n++], 96, "parallel.virtual_pipeline_model_parallel_size=%d", v);
  else snprintf(k.sets[n++], 96, "parallel.virtual_pipeline_model_parallel_size=null");
  snprintf(k.sets[n++], 96, "parallel.sequence_parallel=%s", tp > 1 ? "true" : "false");
  snprintf(k.sets[n++], 96, "parallel.zero_stage=%d", zero);
  snprintf(k.sets[n++], 96, "training.micro_batch_size=%d", mbs);
  if (rc) snprintf(k.sets[n++], 96, "model.recompute_granularity=\"%s\"", k_rc[rc]);
  else snprintf(k.sets[n++], 96, "model.recompute_granularity=null");
  if (moe) {
    snprintf(k.sets[n++], 96, "parallel.expert_model_parallel_size=%d", ep);
    snprintf(k.sets[n++], 96, "parallel.expert_tensor_parallel_size=%d", etp);
  }
  snprintf(k.sets[n++], 96, "parallel.context_parallel_size=%d", cp);
  k.n_sets = n;
  for (int i = 0; i < k.n_sets; i++) ov[i] = k.sets[i];
  st->tried++;
  mt_config cfg;
  if (mt_config_load_saved(&cfg, st->base->json, st->base->source_path, ov, k.n_sets, st->world,
                           e2, sizeof e2) != 0)
    return;
  /* keys of the base the layout switches off: a user's file that gives them
   * needs them removed too */
  char off[MAX_SETS][96];
  const int n_off = mt_config_keys_switched_off(st->base, &cfg, off, MAX_SETS - k.n_sets);
  for (int i = 0; i < n_off; i++) {
    int dup = 0;
    for (int j = 0; j < k.n_sets; j++) dup |= !strncmp(k.sets[j], off[i], strlen(off[i])) &&
                                              k.sets[j][strlen(off[i])] == '=';
    if (!dup) snprintf(k.sets[k.n_sets++], 96, "%.90s=null", off[i]);
  }
  snprintf(cfg.source_path, sizeof cfg.source_path, "%s", st->base->source_path);
  mt_plan_fp8_copy(&cfg, st->base); /* the --fp8-* flags are not in the base's JSON */
  int bad = mt_plan_compute(&cfg, st->world, st->hw, st->opt, &k.p, e2, sizeof e2);
  mt_config_free(&cfg);
  if (bad) return;
  if (st->n == st->cap) st->c = realloc(st->c, (st->cap *= 2) * sizeof *st->c);
  st->c[st->n++] = k;
}

int mt_plan_sweep(const mt_config *base, int world, const mt_hardware *hw,
                  const mt_plan_options *opt, int top, int json, FILE *f, char *err,
                  size_t errlen) {
  const mt_model_config *m = &base->model;
  int gbs = base->training.global_batch_size, E = m->num_experts;
  sweep_state st = {base, world, hw, opt, NULL, 0, 256, 0};
  st.c = malloc(st.cap * sizeof *st.c);
  for (int tp = 1; tp <= world && tp <= 64; tp++) {
    /* Megatron's rule: tp divides the heads and the query groups (GQA) */
    if (world % tp || m->num_attention_heads % tp) continue;
    if (m->group_query_attention && m->num_query_groups % tp) continue;
    /* context parallelism: powers of two; 2 cp (2 cp tp with SP, which the
     * sweep turns on with tp > 1) must divide seq_length */
    for (int cp = 1; cp <= world / tp; cp *= 2) {
      if ((world / tp) % cp || (cp > 1 && m->seq_length % (2 * cp * tp))) continue;
      for (int pp = 1; pp <= world / tp / cp; pp++) {
        if ((world / tp / cp) % pp || m->num_layers % pp) continue;
        int dp = world / tp / cp / pp;
        if (gbs % dp) continue;
        for (int v = 1; v <= (pp > 1 ? 8 : 1); v++) {
          if (m->num_layers % (pp * v)) continue;
          for (int mbs = 1; mbs <= 16; mbs++) {
            if ((gbs / dp) % mbs || gbs % (dp * mbs)) continue;
            for (int ep = 1; ep <= (E > 0 ? E : 1); ep++) {
              if (E > 0 && (E % ep || (tp * cp * dp) % ep)) continue;
              /* experts unsplit (etp 1) or split like the dense MLP (etp = tp,
               * Megatron's default); the config rules refuse what does not
               * fit (etp ep dividing tp cp dp, biases with etp > 1) */
              for (int etp = 1; etp <= tp; etp = etp < tp && E > 0 ? tp : tp + 1) {
                if (E > 0 && (tp * cp * dp) % (etp * ep)) continue;
                for (int rc = 0; rc < 3; rc++)
                  for (int zero = 0; zero <= (dp * cp > 1 ? 3 : 0); zero++)
                    try_layout(&st, tp, cp, pp, v, mbs, ep, E > 0 ? etp : tp, rc, zero);
              }
            }
          }
        }
      }
    }
  }
  cand *c = st.c;
  size_t n = st.n;
  long tried = st.tried;
  if (n == 0) {
    snprintf(err, errlen, "no valid layout of %s on %d ranks (tried %ld; check num_layers, "
             "num_attention_heads and global_batch_size divisibility)", base->source_path,
             world, tried);
    free(c);
    return 2;
  }
  qsort(c, n, sizeof *c, by_throughput);
  size_t n_fit = 0;
  for (size_t i = 0; i < n; i++) n_fit += c[i].p.mem.fits;
  size_t show = top > 0 && (size_t)top < n ? (size_t)top : n;
  if (json) {
    fprintf(f, "{\"config\":\"%s\",\"hardware\":\"%s\",\"world_size\":%d,\"valid\":%zu,"
            "\"fit\":%zu,\"layouts\":[\n", base->source_path, hw->name, world, n, n_fit);
    for (size_t i = 0; i < show; i++) {
      /* the plan's object with "set" first: the --set list of the layout */
      char *pj = NULL;
      size_t pn = 0;
      FILE *m = open_memstream(&pj, &pn);
      if (!m) {
        snprintf(err, errlen, "out of memory printing the sweep");
        free(c);
        return 1;
      }
      mt_plan_print(m, base, hw, &c[i].p, 1);
      fclose(m);
      fprintf(f, "{\"set\":[");
      for (int j = 0; j < c[i].n_sets; j++) {
        fprintf(f, "%s\"", j ? "," : "");
        for (const char *q = c[i].sets[j]; *q; q++) {
          if (*q == '"' || *q == '\\') fputc('\\', f);
          fputc(*q, f);
        }
        fprintf(f, "\"");
      }
      fprintf(f, "],%s%s", pj[0] == '{' ? pj + 1 : pj, i + 1 < show ? "," : "");
      free(pj);
    }
    fprintf(f, "]}\n");
  } else {
    fprintf(f, "megatrain plan --sweep: %s on %d x %s: %zu valid layouts, %zu fit; ranked by "
            "predicted throughput\n", base->source_path, world, hw->name, n, n_fit);
    fprintf(f, "%4s %3s %3s %2s %4s %3s %3s %3s %2s %4s %-9s %4s %8s %7s %6s %6s %10s  %s\n",
            "rank", "tp", "pp", "v", "dp", "cp", "ep", "etp", "sp", "zero", "recompute", "mbs",
            "mem_GiB", "iter_s", "TFLOPs", "MFU%", "tokens/s", "fits");
    for (size_t i = 0; i < show; i++) {
      const mt_plan *p = &c[i].p;
      fprintf(f,
              "%4zu %3d %3d %2d %4d %3d %3d %3d %2s %4d %-9s %4d %8.2f %7.4g %6.1f %6.1f %10.4g  %s\n",
              i + 1, p->tp, p->pp, p->vpp, p->dp, p->cp, p->ep, p->etp, p->sp ? "y" : "n", p->zero,
              p->recompute == 1 ? "selective" : p->recompute == 2 ? "full" : "none", p->mbs,
              p->mem.total / 1073741824.0, p->time.t_iter, p->time.tflops_per_gpu,
              100 * p->time.mfu, p->time.tokens_per_s, p->mem.fits ? "yes" : "NO");
    }
    if (n_fit == 0) fprintf(f, "no layout fits in %.1f GiB per GPU\n", hw->hbm_gib);
  }
  free(c);
  return 0;
}
