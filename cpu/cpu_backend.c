/* cpu/cpu_backend.c — the CPU backend (fp32 or bf16 storage): process-wide
 * set-up, construction, destruction and the two op tables (cpu_backend.h;
 * the ops by family: cpu_internal.h; the allocator, the op scratch and the
 * memory ops: cpu_memory.c).
 *
 * Threads: mt_cpu_process_init(num_threads > 0) sets the OpenMP thread count
 * once at start-up; every op (GEMM included) parallelises with OpenMP, and
 * OpenBLAS runs one thread per call. Environment knobs:
 *   MEGATRAIN_OPENBLAS_CORETYPE  <core>|auto: switch OpenBLAS kernels (see
 *                                below; read by mt_cpu_process_init)
 *   MEGATRAIN_CPU_GEMM=blas      let OpenBLAS thread GEMMs itself (num_threads)
 *   MEGATRAIN_CPU_GEMM_SLABS     slabs a large GEMM is cut into (default 16;
 *                                results depend on it, not on the threads)
 *   MEGATRAIN_CPU_PAR_MIN        elements from which elementwise ops go
 *                                parallel
 */
#include <cblas.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/util.h"
#include "cpu_backend.h"
#include "cpu_internal.h"

static void cpu_destroy(mt_backend *be) {
  if (!be) return;
  cpu_impl *im = cpu_impl_of(be);
  if (im) {
    cpu_free(be, im->ws);
    cpu_free(be, im->bws);
    free(im);
  }
  free(be);
}

/* OpenBLAS kernel choice. OpenBLAS picks its kernels when the library loads,
 * from OPENBLAS_CORETYPE or CPU detection; on the AVX-512 dev machine its
 * own pick (Cooperlake) runs sgemm ~2x faster than the AVX2 "Haswell"
 * kernels that its environment forces (bench/bench_ops: ~200 vs ~105
 * GFLOP/s per core). MEGATRAIN_OPENBLAS_CORETYPE switches OpenBLAS at process
 * start-up (mt_cpu_process_init), overriding an inherited OPENBLAS_CORETYPE:
 *   <core> (e.g. SkylakeX, Cooperlake, Haswell): that core;
 *   auto: SkylakeX when the CPU reports AVX-512 F/CD/BW/DQ/VL, else no change.
 * Unset: no change. Switching re-runs OpenBLAS's dynamic-arch selection
 * (entry points exported by DYNAMIC_ARCH builds only, hence weak
 * references) before any BLAS call is in flight. */
extern void gotoblas_dynamic_init(void) __attribute__((weak));
extern void gotoblas_dynamic_quit(void) __attribute__((weak));

static void cpu_pick_openblas_kernels(void) {
  const char *want = getenv("MEGATRAIN_OPENBLAS_CORETYPE");
  if (!want || !*want || !gotoblas_dynamic_init || !gotoblas_dynamic_quit) return;
  if (strcasecmp(want, "auto") == 0) {
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512cd") ||
        !__builtin_cpu_supports("avx512bw") || !__builtin_cpu_supports("avx512dq") ||
        !__builtin_cpu_supports("avx512vl"))
      return;
    want = "SkylakeX";
  }
  const char *core = openblas_get_corename();
  if (core && strcasecmp(core, want) == 0) return;
  setenv("OPENBLAS_CORETYPE", want, 1);
  gotoblas_dynamic_quit();
  gotoblas_dynamic_init();
}

/* The op tables: one entry per slot of core/backend.h, in its order, each
 * the function of that name in its family's file (cpu_internal.h). fp32
 * storage: cpu_<op>; bf16 storage: cpu_bf16_<op> where the op has T
 * operands, the fp32 op where it has none (fill and cast take their dtypes,
 * xent_loss and the *_f32 ops are fp32 by definition) and the memory ops. */
static const mt_backend_ops cpu_ops = {
    /* memory (cpu_memory.c) */
    .alloc = cpu_alloc,
    .free = cpu_free,
    .memcpy_h2d = cpu_memcpy,
    .memcpy_d2h = cpu_memcpy,
    .memcpy_d2d = cpu_memcpy,
    .memset0 = cpu_memset0,
    .synchronize = cpu_synchronize,
    /* elementwise (cpu_elementwise.c) */
    .init_normal = cpu_init_normal,
    .fill = cpu_fill,
    .cast = cpu_cast,
    /* GEMM (cpu_gemm.c, cpu_gemm_grouped.c, cpu_gemm_bias.c) */
    .gemm = cpu_gemm,
    .gemm_grouped = cpu_gemm_grouped,
    .bias_grad = cpu_bias_grad,
    .fp8_amax = cpu_fp8_amax,
    .fp8_quantize = cpu_fp8_quantize,
    .fp8_dequantize = cpu_fp8_dequantize,
    /* norms (cpu_norm.c), activations (cpu_activation.c), RoPE (cpu_rope.c) */
    .layernorm_fwd = cpu_layernorm_fwd,
    .layernorm_bwd = cpu_layernorm_bwd,
    .rmsnorm_fwd = cpu_rmsnorm_fwd,
    .rmsnorm_bwd = cpu_rmsnorm_bwd,
    .swiglu_fwd = cpu_swiglu_fwd,
    .swiglu_bwd = cpu_swiglu_bwd,
    .rope_fwd = cpu_rope_fwd,
    .rope_bwd = cpu_rope_bwd,
    .qknorm_fwd = cpu_qknorm_fwd,
    .qknorm_bwd = cpu_qknorm_bwd,
    .gelu_fwd = cpu_gelu_fwd,
    .gelu_bwd = cpu_gelu_bwd,
    /* fused attention (cpu_flash_attn.c, cpu_flash_attn_bwd.c) */
    .flash_attn_fwd = cpu_flash_attn_fwd,
    .attn_merge = cpu_attn_merge,
    .flash_attn_bwd = cpu_flash_attn_bwd,
    /* dropout (cpu_elementwise.c) */
    .dropout_add_fwd = cpu_dropout_add_fwd,
    .dropout_bwd = cpu_dropout_bwd,
    /* embeddings (cpu_embedding.c) */
    .embedding_fwd = cpu_embedding_fwd,
    .embedding_bwd = cpu_embedding_bwd,
    .pos_embedding_fwd = cpu_pos_embedding_fwd,
    .pos_embedding_bwd = cpu_pos_embedding_bwd,
    /* cross-entropy (cpu_cross_entropy.c) */
    .xent_max = cpu_xent_max,
    .xent_stats = cpu_xent_stats,
    .xent_loss = cpu_xent_loss,
    .xent_bwd = cpu_xent_bwd,
    /* elementwise (cpu_elementwise.c), reductions (cpu_optimizer.c) */
    .add = cpu_add,
    .axpy_f32 = cpu_axpy_f32,
    .scale_f32 = cpu_scale_f32,
    .sumsq_f32 = cpu_sumsq_f32,
    .sum_f32 = cpu_sum_f32,
    .sumsq_acc_f32 = cpu_sumsq_acc_f32,
    /* MoE (cpu_moe.c) */
    .moe_gather_rows = cpu_moe_gather_rows,
    .moe_combine_fwd = cpu_moe_combine_fwd,
    .moe_combine_bwd = cpu_moe_combine_bwd,
    /* optimizer (cpu_optimizer.c) */
    .adamw = cpu_adamw,
};

static const mt_backend_ops cpu_bf16_ops = {
    /* memory (cpu_memory.c) */
    .alloc = cpu_alloc,
    .free = cpu_free,
    .memcpy_h2d = cpu_memcpy,
    .memcpy_d2h = cpu_memcpy,
    .memcpy_d2d = cpu_memcpy,
    .memset0 = cpu_memset0,
    .synchronize = cpu_synchronize,
    /* elementwise (cpu_elementwise.c) */
    .init_normal = cpu_bf16_init_normal,
    .fill = cpu_fill,
    .cast = cpu_cast,
    /* GEMM (cpu_gemm.c, cpu_gemm_grouped.c, cpu_gemm_bias.c) */
    .gemm = cpu_bf16_gemm,
    .gemm_grouped = cpu_bf16_gemm_grouped,
    .bias_grad = cpu_bf16_bias_grad,
    .fp8_amax = cpu_fp8_amax,
    .fp8_quantize = cpu_fp8_quantize,
    .fp8_dequantize = cpu_fp8_dequantize,
    /* norms (cpu_norm.c), activations (cpu_activation.c), RoPE (cpu_rope.c) */
    .layernorm_fwd = cpu_bf16_layernorm_fwd,
    .layernorm_bwd = cpu_bf16_layernorm_bwd,
    .rmsnorm_fwd = cpu_bf16_rmsnorm_fwd,
    .rmsnorm_bwd = cpu_bf16_rmsnorm_bwd,
    .swiglu_fwd = cpu_bf16_swiglu_fwd,
    .swiglu_bwd = cpu_bf16_swiglu_bwd,
    .rope_fwd = cpu_bf16_rope_fwd,
    .rope_bwd = cpu_bf16_rope_bwd,
    .qknorm_fwd = cpu_bf16_qknorm_fwd,
    .qknorm_bwd = cpu_bf16_qknorm_bwd,
    .gelu_fwd = cpu_bf16_gelu_fwd,
    .gelu_bwd = cpu_bf16_gelu_bwd,
    /* fused attention (cpu_flash_attn.c, cpu_flash_attn_bwd.c) */
    .flash_attn_fwd = cpu_bf16_flash_attn_fwd,
    .attn_merge = cpu_bf16_attn_merge,
    .flash_attn_bwd = cpu_bf16_flash_attn_bwd,
    /* dropout (cpu_elementwise.c) */
    .dropout_add_fwd = cpu_bf16_dropout_add_fwd,
    .dropout_bwd = cpu_bf16_dropout_bwd,
    /* embeddings (cpu_embedding.c) */
    .embedding_fwd = cpu_bf16_embedding_fwd,
    .embedding_bwd = cpu_bf16_embedding_bwd,
    .pos_embedding_fwd = cpu_bf16_pos_embedding_fwd,
    .pos_embedding_bwd = cpu_bf16_pos_embedding_bwd,
    /* cross-entropy (cpu_cross_entropy.c) */
    .xent_max = cpu_bf16_xent_max,
    .xent_stats = cpu_bf16_xent_stats,
    .xent_loss = cpu_xent_loss,
    .xent_bwd = cpu_bf16_xent_bwd,
    /* elementwise (cpu_elementwise.c), reductions (cpu_optimizer.c) */
    .add = cpu_bf16_add,
    .axpy_f32 = cpu_axpy_f32,
    .scale_f32 = cpu_scale_f32,
    .sumsq_f32 = cpu_sumsq_f32,
    .sum_f32 = cpu_sum_f32,
    .sumsq_acc_f32 = cpu_sumsq_acc_f32,
    /* MoE (cpu_moe.c) */
    .moe_gather_rows = cpu_bf16_moe_gather_rows,
    .moe_combine_fwd = cpu_bf16_moe_combine_fwd,
    .moe_combine_bwd = cpu_bf16_moe_combine_bwd,
    /* optimizer (cpu_optimizer.c) */
    .adamw = cpu_bf16_adamw,
};

/* GEMMs split over OpenMP threads (default) or left to OpenBLAS's threads
 * (MEGATRAIN_CPU_GEMM=blas). */
static int cpu_gemm_omp(void) {
  const char *mode = getenv("MEGATRAIN_CPU_GEMM");
  return !(mode && !strcmp(mode, "blas"));
}

void mt_cpu_process_init(int num_threads) {
  cpu_pick_openblas_kernels();
  int gemm_omp = cpu_gemm_omp();
  if (num_threads > 0) omp_set_num_threads(num_threads);
  /* OpenBLAS threads: 1 when GEMMs are split over OpenMP threads, else the
   * requested count (0 = keep the library default / OPENBLAS_NUM_THREADS). */
  if (gemm_omp)
    openblas_set_num_threads(1);
  else if (num_threads > 0)
    openblas_set_num_threads(num_threads);
}

/* is_device_ptr: host memory is never device memory, except under the
 * staging test switch (core/backend.h). */
static int cpu_is_device_ptr_none(const mt_backend *be, const void *p) {
  (void)be, (void)p;
  return 0;
}
static int cpu_is_device_ptr_all(const mt_backend *be, const void *p) {
  (void)be, (void)p;
  return 1;
}

mt_backend *mt_cpu_backend_create(const mt_backend_options *opt, char *err, size_t errlen) {
  const mt_dtype dt = opt ? opt->dtype : MT_F32;
  if (dt != MT_F32 && dt != MT_BF16) {
    snprintf(err, errlen, "cpu backend stores fp32 or bf16 (requested %s)", mt_dtype_name(dt));
    return NULL;
  }
  mt_backend *be = mt_xcalloc(1, sizeof *be);
  cpu_impl *im = mt_xcalloc(1, sizeof *im);
  im->num_threads = omp_get_max_threads();
  im->gemm_omp = cpu_gemm_omp();
  const char *pm = getenv("MEGATRAIN_CPU_PAR_MIN");
  im->par_min = pm && atoll(pm) > 0 ? atoll(pm) : CPU_PAR_MIN_DEFAULT;
  const char *slabs = getenv("MEGATRAIN_CPU_GEMM_SLABS");
  im->gemm_slabs = slabs && atoi(slabs) > 0 ? atoi(slabs) : 16;
  const char *fg = getenv("MEGATRAIN_CPU_FLASH_GEMM");
  im->flash_blas = fg && !strcmp(fg, "blas");
  be->ops = dt == MT_BF16 ? &cpu_bf16_ops : &cpu_ops;
  be->name = "cpu";
  be->dtype = dt;
  be->impl = im;
  be->destroy = cpu_destroy;
  const char *db = getenv("MEGATRAIN_TEST_DEVICE_BUFFERS");
  be->is_device_ptr = db && !strcmp(db, "1") ? cpu_is_device_ptr_all : cpu_is_device_ptr_none;
  return be;
}
