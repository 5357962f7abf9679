/* cpu/cpu_gemm_grouped.c — the grouped GEMM op (core/backend.h
 * gemm_grouped; Megatron-core's GroupedMLP): one OpenMP parallel region over
 * (group, tile) pairs.
 *
 * Bitwise contract: each group is cut into exactly the slabs cpu_gemm cuts
 * an equal product into (cpu_gemm_slabs: the same shape gives the same
 * cut, whatever the thread count) and each slab is the same
 * single-threaded sgemm call (cpu_gemm_block), so every element of C_g is
 * computed by the same kernel with the same summation order as in a loop
 * of gemm calls. What changes is only which thread runs which tile, and
 * that small groups (below the threading threshold, one tile each) now run
 * side by side instead of one after the other.
 *
 * Groups writing the same C (the weight gradient of one expert from the
 * blocks of several source ranks) must be applied in group order: group g
 * gets the stage "number of earlier groups with the same C", and the stages
 * run one after the other (a worksharing loop each, inside the one parallel
 * region), so the accumulation order is the loop's. bf16 storage: the
 * groups one after the other through cpu_bf16_gemm (the spec's "gemm once
 * per group"). cuda/cuda_gemm_grouped.c is the GPU counterpart. */
#include <omp.h>
#include <stdlib.h>

#include "core/util.h"
#include "cpu_internal.h"

typedef struct {
  int g, sl;
} gg_task;

void cpu_gemm_grouped(mt_backend *be, const mt_gemm_grouped_desc *d) {
  MT_ASSERT(d->a_type == MT_F32 && d->b_type == MT_F32 && d->c_type == MT_F32);
  MT_ASSERT(d->groups >= 0);
  const int G = d->groups;
  if (G == 0) return;
  const int nthr = cpu_gemm_nthreads(be);
  mt_gemm_desc *gd = mt_xmalloc(sizeof *gd * (size_t)G);
  int *stage = mt_xmalloc(sizeof(int) * (size_t)G), *split = mt_xmalloc(sizeof(int) * (size_t)G);
  int *per = mt_xmalloc(sizeof(int) * (size_t)G), *nsl = mt_xmalloc(sizeof(int) * (size_t)G);
  const int nstage = mt_gemm_grouped_stages(d, stage);
  int64_t ntask = 0;
  for (int g = 0; g < G; g++) {
    MT_ASSERT(d->m[g] >= 0 && d->n[g] >= 0 && d->k[g] >= 0);
    gd[g] = mt_gemm_grouped_member(d, g);
    nsl[g] = d->m[g] && d->n[g]
                 ? cpu_gemm_slabs(be, d->m[g], d->n[g], d->k[g], &split[g], &per[g])
                 : 0;
    ntask += nsl[g];
  }
  /* tasks in stage order; stage s is tasks [first[s], first[s + 1]) */
  gg_task *task = mt_xmalloc(sizeof *task * (size_t)(ntask ? ntask : 1));
  int64_t *first = mt_xmalloc(sizeof(int64_t) * (size_t)(nstage + 1));
  int64_t nt = 0;
  for (int s = 0; s < nstage; s++) {
    first[s] = nt;
    for (int g = 0; g < G; g++)
      if (stage[g] == s)
        for (int sl = 0; sl < nsl[g]; sl++) task[nt++] = (gg_task){g, sl};
  }
  first[nstage] = nt;
  if (nthr == 1 || ntask <= 1) {
    for (int64_t t = 0; t < ntask; t++) {
      const mt_gemm_desc *e = &gd[task[t].g];
      cpu_gemm_slab(e, e->a, e->b, e->c, split[task[t].g], per[task[t].g], task[t].sl);
    }
  } else {
#pragma omp parallel num_threads(nthr)
    for (int s = 0; s < nstage; s++) {
#pragma omp for schedule(dynamic, 1)
      for (int64_t t = first[s]; t < first[s + 1]; t++) {
        const mt_gemm_desc *e = &gd[task[t].g];
        cpu_gemm_slab(e, e->a, e->b, e->c, split[task[t].g], per[task[t].g], task[t].sl);
      }
    }
  }
  free(task);
  free(first);
  free(gd);
  free(stage);
  free(split);
  free(per);
  free(nsl);
}

/* ---- bf16 storage ---- */

/* Group by group in group order: exactly "gemm once per group" (the spec's
 * definition), groups naming the same C accumulating in that order. */
void cpu_bf16_gemm_grouped(mt_backend *be, const mt_gemm_grouped_desc *d) {
  MT_ASSERT(d->groups >= 0);
  for (int g = 0; g < d->groups; g++) {
    MT_ASSERT(d->m[g] >= 0 && d->n[g] >= 0 && d->k[g] >= 0);
    const mt_gemm_desc e = mt_gemm_grouped_member(d, g);
    cpu_bf16_gemm(be, &e);
  }
}
