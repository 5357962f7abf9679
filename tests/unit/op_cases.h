/* tests/unit/op_cases.h — THE table of backend op cases (ggml's
 * test-backend-ops): one row per {op, output, shape, dtype, tolerance}.
 * Each row runs on every compiled backend (op_harness.h): fp32 rows on cpu
 * against the double-precision reference with `tol`, and on cuda against
 * cpu with `tolg`; bf16 rows on the cpu backend with bf16 storage and on
 * cuda (each against cpu fp32 on bf16-exact inputs, with `tolg`; cpu-bf16
 * also bitwise the fp32 result rounded once).
 * Shapes and parameters are documented at each runner (op_runners_*.h).
 *
 * Tolerances (limit = atol + rtol |want| + mtol max|want|):
 *   cpu forward ops: rel 1e-5 elementwise (exact where the op is one float
 *     operation or a copy); backward ops against finite differences: 1e-3 of
 *     the largest entry plus 1e-3 relative;
 *   cuda fp32: 1e-5 of max|cpu| (cuBLAS vs OpenBLAS summation order, FMA,
 *     expf), LayerNorm's mean 1e-4;
 *   cuda bf16: 2^-8 for ops that round once, 2^-6 for chains through bf16
 *     intermediates (LayerNorm backward), 2^-5 for attention; fp32 outputs
 *     from bf16-exact inputs keep 1e-5 (docs/cuda.md). */
#ifndef MT_TESTS_OP_CASES_H
#define MT_TESTS_OP_CASES_H

#include "op_runners_llama.h"
#include "op_runners_flash.h"
#include "op_runners_grouped.h"
#include "op_runners_fp8.h"

#define TX {0, 0, 0}               /* bitwise */
#define TF(r, a) {r, a, 0}         /* elementwise rel r, abs a */
#define TG(r) {r, 1e-12, r}        /* gradients vs finite differences */
#define TM(m) {0, 0, m}            /* relative to max|want| */
#define B8 (1.0 / 256)
#define B6 (1.0 / 64)
#define B5 (1.0 / 32)
#define F32 MT_F32
#define BF16 MT_BF16
#define DET OT_DET
#define MASK OT_MASK
#define CPU OT_CPU
#define CHAIN OT_CHAIN

static const op_case ot_cases[] = {
    /* ---- gemm: ne {m, n, k, batch}, ip {ta, tb, bias, fp32 C}, fp {alpha, beta} ---- */
    {"gemm", "c", {13, 7, 9, 1}, {0, 0, 0, 0}, {1, 0}, F32, TF(1e-5, 1e-5), TM(1e-5), 0},
    {"gemm", "c", {13, 7, 9, 1}, {0, 1, 0, 0}, {1, 0}, F32, TF(1e-5, 1e-5), TM(1e-5), 0},
    {"gemm", "c", {13, 7, 9, 1}, {1, 0, 0, 0}, {1, 0}, F32, TF(1e-5, 1e-5), TM(1e-5), 0},
    {"gemm", "c", {13, 7, 9, 1}, {1, 1, 0, 0}, {1, 0}, F32, TF(1e-5, 1e-5), TM(1e-5), 0},
    {"gemm", "c", {5, 17, 33, 3}, {0, 0, 0, 0}, {0.7f, 0.5f}, F32, TF(1e-5, 1e-5), TM(1e-5), 0},
    {"gemm", "c", {5, 17, 33, 3}, {0, 1, 0, 0}, {0.7f, 0.5f}, F32, TF(1e-5, 1e-5), TM(1e-5), 0},
    {"gemm", "c", {5, 17, 33, 3}, {1, 0, 0, 0}, {0.7f, 0.5f}, F32, TF(1e-5, 1e-5), TM(1e-5), 0},
    {"gemm", "c", {5, 17, 33, 3}, {1, 1, 0, 0}, {0.7f, 0.5f}, F32, TF(1e-5, 1e-5), TM(1e-5), 0},
    {"gemm", "c", {13, 7, 9, 2}, {0, 0, 1, 0}, {1, 0}, F32, TF(1e-5, 1e-5), TM(1e-5), 0},
    {"gemm", "c", {13, 7, 9, 2}, {0, 1, 1, 0}, {1, 0}, F32, TF(1e-5, 1e-5), TM(1e-5), 0},
    {"gemm", "c", {13, 7, 9, 2}, {1, 0, 1, 0}, {1, 0}, F32, TF(1e-5, 1e-5), TM(1e-5), 0},
    {"gemm", "c", {13, 7, 9, 2}, {1, 1, 1, 0}, {1, 0}, F32, TF(1e-5, 1e-5), TM(1e-5), 0},
    {"gemm", "c", {9, 11, 3, 1}, {0, 0, 1, 0}, {-0.5f, 1}, F32, TF(1e-5, 1e-5), TM(1e-5), 0},
    {"gemm", "c", {9, 11, 3, 1}, {0, 1, 1, 0}, {-0.5f, 1}, F32, TF(1e-5, 1e-5), TM(1e-5), 0},
    {"gemm", "c", {9, 11, 3, 1}, {1, 0, 1, 0}, {-0.5f, 1}, F32, TF(1e-5, 1e-5), TM(1e-5), 0},
    {"gemm", "c", {9, 11, 3, 1}, {1, 1, 1, 0}, {-0.5f, 1}, F32, TF(1e-5, 1e-5), TM(1e-5), 0},
    /* kernel edge cases: odd small shapes */
    {"gemm", "c", {1, 1, 1, 1}, {0, 0, 1, 0}, {1, 0}, F32, TF(1e-5, 1e-5), TM(1e-5), 0},
    {"gemm", "c", {1, 37, 5, 1}, {1, 0, 0, 0}, {1, 1}, F32, TF(1e-5, 1e-5), TM(1e-5), 0},
    {"gemm", "c", {23, 1, 40, 1}, {0, 1, 0, 0}, {1, 0}, F32, TF(1e-5, 1e-5), TM(1e-5), 0},
    /* one row (a decode step: cpu/ takes the matrix-vector product), every transpose, bias, beta */
    {"gemm", "c", {1, 37, 29, 2}, {0, 0, 1, 0}, {1, 0}, F32, TF(1e-5, 1e-5), TM(1e-5), 0},
    {"gemm", "c", {1, 37, 29, 2}, {0, 1, 1, 0}, {0.7f, 0.5f}, F32, TF(1e-5, 1e-5), TM(1e-5), 0},
    {"gemm", "c", {1, 37, 29, 2}, {1, 0, 0, 0}, {1, 1}, F32, TF(1e-5, 1e-5), TM(1e-5), 0},
    {"gemm", "c", {1, 37, 29, 2}, {1, 1, 1, 0}, {-0.5f, 1}, F32, TF(1e-5, 1e-5), TM(1e-5), 0},
    {"gemm", "c", {31, 29, 1, 1}, {1, 1, 1, 0}, {1, 1}, F32, TF(1e-5, 1e-5), TM(1e-5), 0},
    {"gemm", "c", {40, 3, 17, 1}, {0, 0, 0, 0}, {1, 1}, F32, TF(1e-5, 1e-5), TM(1e-5), 0},
    {"gemm", "c", {2, 40, 39, 1}, {1, 0, 1, 0}, {1, 0}, F32, TF(1e-5, 1e-5), TM(1e-5), 0},
    {"gemm", "c", {17, 33, 8, 1}, {0, 1, 0, 0}, {1, 1}, F32, TF(1e-5, 1e-5), TM(1e-5), 0},
    {"gemm", "c", {7, 5, 31, 1}, {1, 1, 0, 0}, {1, 0}, F32, TF(1e-5, 1e-5), TM(1e-5), 0},
    {"gemm", "c", {16, 16, 16, 1}, {0, 0, 1, 0}, {1, 1}, F32, TF(1e-5, 1e-5), TM(1e-5), 0},
    {"gemm", "c", {39, 2, 3, 1}, {1, 0, 0, 0}, {1, 0}, F32, TF(1e-5, 1e-5), TM(1e-5), 0},
    /* above the threading threshold: slabs over columns and over rows */
    {"gemm", "c", {90, 171, 80, 1}, {0, 0, 1, 0}, {1, 0}, F32, TF(1e-5, 1e-5), TM(1e-5), 0},
    {"gemm", "c", {90, 171, 80, 1}, {0, 1, 1, 0}, {1, 0}, F32, TF(1e-5, 1e-5), TM(1e-5), 0},
    {"gemm", "c", {90, 171, 80, 1}, {1, 0, 1, 0}, {1, 0}, F32, TF(1e-5, 1e-5), TM(1e-5), 0},
    {"gemm", "c", {90, 171, 80, 1}, {1, 1, 1, 0}, {1, 0}, F32, TF(1e-5, 1e-5), TM(1e-5), 0},
    {"gemm", "c", {173, 90, 81, 2}, {0, 0, 1, 0}, {0.5f, 0.5f}, F32, TF(1e-5, 1e-5), TM(1e-5), 0},
    {"gemm", "c", {173, 90, 81, 2}, {0, 1, 1, 0}, {0.5f, 0.5f}, F32, TF(1e-5, 1e-5), TM(1e-5), 0},
    {"gemm", "c", {173, 90, 81, 2}, {1, 0, 1, 0}, {0.5f, 0.5f}, F32, TF(1e-5, 1e-5), TM(1e-5), 0},
    {"gemm", "c", {173, 90, 81, 2}, {1, 1, 1, 0}, {0.5f, 0.5f}, F32, TF(1e-5, 1e-5), TM(1e-5), 0},
    {"gemm", "c", {33, 40, 24, 1}, {1, 0, 0, 1}, {0.7f, 1}, F32, TF(1e-5, 1e-5), TM(1e-5), 0},
    {"gemm", "c", {33, 40, 24, 2}, {0, 0, 1, 0}, {0.7f, 0}, BF16, TX, TM(B8), 0},
    {"gemm", "c", {33, 40, 24, 1}, {0, 1, 1, 0}, {0.7f, 0.5f}, BF16, TX, TM(B8), 0},
    {"gemm", "c", {33, 40, 24, 1}, {1, 0, 0, 1}, {0.7f, 1}, BF16, TX, TM(1e-5), 0},
    /* ---- gemm_grouped: ne {G, m, n, k}, ip {ta, tb, bias, mode}, fp {alpha, beta};
     * mode 0: per-group m (0-row groups), 1: per-group k + groups sharing C
     * (in order), 2: per-group m, n, k; +4: fp32 C (op_runners_grouped.h) ---- */
    {"gemm_grouped", "c", {7, 13, 9, 11}, {0, 1, 1, 0}, {1, 0}, F32, TF(1e-5, 1e-5), TM(1e-5), DET},
    {"gemm_grouped", "c_loop", {7, 13, 9, 11}, {0, 1, 1, 0}, {1, 0}, F32, TX, TM(1e-5), 0},
    {"gemm_grouped", "c", {6, 5, 17, 12}, {0, 0, 0, 0}, {0.7f, 0.5f}, F32, TF(1e-5, 1e-5), TM(1e-5), 0},
    {"gemm_grouped", "c_loop", {6, 5, 17, 12}, {0, 0, 0, 0}, {0.7f, 0.5f}, F32, TX, TM(1e-5), 0},
    {"gemm_grouped", "c", {8, 11, 10, 9}, {1, 0, 0, 1}, {1, 1}, F32, TF(1e-5, 1e-5), TM(1e-5), DET},
    {"gemm_grouped", "c_loop", {8, 11, 10, 9}, {1, 0, 0, 1}, {1, 1}, F32, TX, TM(1e-5), 0},
    {"gemm_grouped", "c", {5, 7, 6, 8}, {1, 1, 1, 2}, {-0.5f, 1}, F32, TF(1e-5, 1e-5), TM(1e-5), 0},
    {"gemm_grouped", "c_loop", {5, 7, 6, 8}, {1, 1, 1, 2}, {-0.5f, 1}, F32, TX, TM(1e-5), 0},
    {"gemm_grouped", "c_loop", {5, 7, 6, 8}, {0, 0, 1, 2}, {1, 0}, F32, TX, TM(1e-5), 0},
    /* above the threading threshold: groups cut into gemm's slabs */
    {"gemm_grouped", "c", {4, 150, 96, 80}, {0, 1, 1, 0}, {1, 0}, F32, TF(1e-5, 1e-5), TM(1e-5), DET},
    {"gemm_grouped", "c_loop", {4, 150, 96, 80}, {0, 1, 1, 0}, {1, 0}, F32, TX, TM(1e-5), 0},
    {"gemm_grouped", "c_loop", {4, 60, 200, 150}, {0, 0, 0, 0}, {1, 0}, F32, TX, TM(1e-5), 0},
    {"gemm_grouped", "c", {6, 96, 80, 150}, {1, 0, 0, 1}, {1, 1}, F32, TF(1e-5, 1e-5), TM(1e-5), DET},
    {"gemm_grouped", "c_loop", {6, 96, 80, 150}, {1, 0, 0, 1}, {1, 1}, F32, TX, TM(1e-5), 0},
    {"gemm_grouped", "c_loop", {16, 20, 64, 48}, {0, 1, 1, 0}, {1, 0}, F32, TX, TM(1e-5), DET},
    {"gemm_grouped", "c", {7, 13, 24, 16}, {0, 1, 1, 0}, {1, 0}, BF16, TX, TM(B8), 0},
    {"gemm_grouped", "c", {6, 24, 16, 13}, {1, 0, 0, 5}, {1, 1}, BF16, TX, TM(1e-5), 0},
    {"gemm_grouped", "c", {6, 13, 24, 16}, {0, 0, 0, 4}, {1, 0}, BF16, TX, TM(1e-5), 0},
    /* ---- bias_grad: ne {rows, n} ---- */
    {"bias_grad", "db", {37, 131}, {0}, {0}, F32, TF(1e-5, 1e-5), TM(1e-5), 0},
    {"bias_grad", "db", {300, 77}, {0}, {0}, F32, TF(1e-5, 1e-5), TM(1e-5), DET},
    {"bias_grad", "db", {70, 50}, {0}, {0}, BF16, TX, TM(1e-5), 0},
    /* ---- layernorm: ne {rows, h} ---- */
    {"layernorm_fwd", "y", {19, 77}, {0}, {0}, F32, TF(1e-5, 1e-5), TM(1e-5), 0},
    {"layernorm_fwd", "mean", {19, 77}, {0}, {0}, F32, TF(1e-5, 1e-6), TM(1e-4), 0},
    {"layernorm_fwd", "rstd", {19, 77}, {0}, {0}, F32, TF(1e-5, 0), TM(1e-5), 0},
    /* h a multiple of 16 bytes: the cuda backend's vec kernels (16-byte rows) */
    {"layernorm_fwd", "y", {19, 96}, {0}, {0}, F32, TF(1e-5, 1e-5), TM(1e-5), 0},
    {"layernorm_fwd", "mean", {19, 96}, {0}, {0}, F32, TF(1e-5, 1e-6), TM(1e-4), 0},
    {"layernorm_fwd", "y", {70, 96}, {0}, {0}, BF16, TX, TM(B8), 0},
    {"layernorm_fwd", "mean", {70, 96}, {0}, {0}, BF16, TX, TM(1e-4), 0},
    {"layernorm_fwd", "rstd", {70, 96}, {0}, {0}, BF16, TX, TM(1e-5), 0},
    {"layernorm_bwd", "din", {37, 13}, {0}, {0}, F32, TG(1e-3), TM(1e-5), 0},
    {"layernorm_bwd", "dw", {37, 13}, {0}, {0}, F32, TG(1e-3), TM(1e-5), 0},
    {"layernorm_bwd", "db", {37, 13}, {0}, {0}, F32, TG(1e-3), TM(1e-5), 0},
    {"layernorm_bwd", "din", {300, 13}, {0}, {0}, F32, TG(1e-3), TM(1e-5), DET},
    {"layernorm_bwd", "dw", {300, 13}, {0}, {0}, F32, TG(1e-3), TM(1e-5), DET},
    {"layernorm_bwd", "db", {300, 13}, {0}, {0}, F32, TG(1e-3), TM(1e-5), DET},
    {"layernorm_bwd", "din", {19, 96}, {0}, {0}, F32, TG(1e-3), TM(1e-5), 0},
    {"layernorm_bwd", "din", {70, 96}, {0}, {0}, BF16, TX, TM(B6), 0},
    {"layernorm_bwd", "dw", {70, 96}, {0}, {0}, BF16, TX, TM(1e-5), 0},
    {"layernorm_bwd", "db", {70, 96}, {0}, {0}, BF16, TX, TM(1e-5), 0},
    /* ---- gelu: ne {n}; ip[0] = also din aliasing dout ---- */
    {"gelu_fwd", "y", {40001}, {0}, {0}, F32, TF(1e-5, 1e-7), TM(1e-5), 0},
    {"gelu_fwd", "y", {1000}, {0}, {0}, BF16, TX, TM(B8), 0},
    {"gelu_bwd", "din", {30011}, {1}, {0}, F32, TF(1e-3, 1e-6), TM(1e-5), 0},
    {"gelu_bwd", "din", {1000}, {1}, {0}, BF16, TX, TM(B8), 0},
    /* ---- rmsnorm: ne {rows, h} ---- */
    {"rmsnorm_fwd", "y", {19, 77}, {0}, {0}, F32, TF(1e-5, 1e-5), TM(1e-5), 0},
    {"rmsnorm_fwd", "rstd", {19, 77}, {0}, {0}, F32, TF(1e-5, 0), TM(1e-5), 0},
    {"rmsnorm_fwd", "y", {300, 33}, {0}, {0}, F32, TF(1e-5, 1e-5), TM(1e-5), DET},
    {"rmsnorm_fwd", "y", {19, 96}, {0}, {0}, F32, TF(1e-5, 1e-5), TM(1e-5), 0},
    {"rmsnorm_fwd", "y", {70, 96}, {0}, {0}, BF16, TX, TM(B8), 0},
    {"rmsnorm_fwd", "rstd", {70, 96}, {0}, {0}, BF16, TX, TM(1e-5), 0},
    {"rmsnorm_bwd", "din", {37, 13}, {0}, {0}, F32, TG(1e-3), TM(1e-5), 0},
    {"rmsnorm_bwd", "dw", {37, 13}, {0}, {0}, F32, TG(1e-3), TM(1e-5), 0},
    {"rmsnorm_bwd", "din_a", {37, 13}, {0}, {0}, F32, TF(1e-5, 1e-6), TM(1e-5), 0},
    {"rmsnorm_bwd", "dw_a", {37, 13}, {0}, {0}, F32, TF(1e-5, 1e-6), TM(1e-5), 0},
    {"rmsnorm_bwd", "din", {300, 13}, {0}, {0}, F32, TG(1e-3), TM(1e-5), DET},
    {"rmsnorm_bwd", "dw", {300, 13}, {0}, {0}, F32, TG(1e-3), TM(1e-5), DET},
    {"rmsnorm_bwd", "din_a", {19, 96}, {0}, {0}, F32, TF(1e-5, 1e-6), TM(1e-5), 0},
    {"rmsnorm_bwd", "din", {70, 96}, {0}, {0}, BF16, TX, TM(B6), 0},
    {"rmsnorm_bwd", "dw", {70, 96}, {0}, {0}, BF16, TX, TM(1e-5), 0},
    /* ---- swiglu: ne {rows, f} (in [rows, 2f]: gate, up) ---- */
    {"swiglu_fwd", "y", {37, 301}, {0}, {0}, F32, TF(1e-5, 1e-7), TM(1e-5), 0},
    {"swiglu_fwd", "y", {300, 101}, {0}, {0}, F32, TF(1e-5, 1e-7), TM(1e-5), DET},
    {"swiglu_fwd", "y", {20, 50}, {0}, {0}, BF16, TX, TM(B8), 0},
    {"swiglu_bwd", "din", {37, 301}, {0}, {0}, F32, TF(1e-3, 1e-6), TM(1e-5), 0},
    {"swiglu_bwd", "din_a", {37, 301}, {0}, {0}, F32, TF(1e-5, 1e-7), TM(1e-5), DET},
    {"swiglu_bwd", "din", {20, 50}, {0}, {0}, BF16, TX, TM(B8), 0},
    /* ---- rope: ne {s, b, np, hn}, ip {ng (0 = np), rot_dim, interleaved,
     * s_offset}, fp[0] = base ---- */
    {"rope_fwd", "qkv", {7, 2, 4, 8}, {2, 8, 0, 0}, {10000}, F32, TF(1e-5, 1e-6), TM(1e-5), DET},
    {"rope_fwd", "qkv", {7, 2, 4, 8}, {1, 8, 1, 0}, {10000}, F32, TF(1e-5, 1e-6), TM(1e-5), 0},
    {"rope_fwd", "qkv", {5, 3, 3, 10}, {0, 6, 0, 37}, {500}, F32, TF(1e-5, 1e-6), TM(1e-5), 0},
    {"rope_fwd", "qkv", {5, 3, 3, 10}, {3, 4, 1, 1000}, {10000}, F32, TF(1e-5, 1e-6), TM(1e-5), 0},
    {"rope_fwd", "qkv", {9, 2, 6, 14}, {2, 14, 0, 5}, {1e6f}, F32, TF(1e-5, 1e-6), TM(1e-5), DET},
    /* frequency scaling (issue 31; ip[4] scaling 1 Llama-3.1 / 2 YaRN,
     * ip[5] original context; fp {base, factor, beta_fast, beta_slow,
     * attn factor}): YaRN with DeepSeek-V2-Lite's factor 40, a range that
     * ramps inside the 16 pairs (L 64) and a cos/sin factor; Llama-3.1 at
     * base 1e6 (pairs in all three bands); long positions (s_offset 3000) */
    {"rope_fwd", "qkv", {6, 2, 4, 32}, {1, 32, 0, 3000, 2, 64}, {10000, 40, 32, 1, 1.37f}, F32,
     TF(1e-5, 1e-6), TM(1e-5), DET},
    {"rope_fwd", "qkv", {6, 2, 3, 16}, {0, 16, 0, 5, 2, 4096}, {10000, 4, 32, 1, 0}, F32,
     TF(1e-5, 1e-6), TM(1e-5), 0},
    {"rope_fwd", "qkv", {6, 2, 4, 32}, {2, 32, 0, 3000, 1, 0}, {1e6f, 8}, F32, TF(1e-5, 1e-6),
     TM(1e-5), 0},
    {"rope_bwd", "dqkv", {5, 2, 4, 16}, {1, 16, 0, 7, 2, 64}, {10000, 40, 32, 1, 1.37f}, F32,
     TG(1e-3), TM(1e-5), 0},
    {"rope_bwd", "dqkv_a", {5, 2, 4, 16}, {2, 16, 0, 900, 1, 0}, {1e6f, 8}, F32, TF(1e-5, 1e-6),
     TM(1e-5), 0},
    {"rope_bwd", "dqkv", {5, 2, 4, 8}, {2, 8, 0, 3}, {10000}, F32, TG(1e-3), TM(1e-5), 0},
    {"rope_bwd", "dqkv", {5, 2, 4, 8}, {1, 6, 1, 0}, {10000}, F32, TG(1e-3), TM(1e-5), 0},
    {"rope_bwd", "dqkv_a", {5, 3, 3, 10}, {0, 6, 0, 37}, {500}, F32, TF(1e-5, 1e-6), TM(1e-5), DET},
    {"rope_bwd", "dqkv_a", {5, 3, 3, 10}, {3, 4, 1, 1000}, {10000}, F32, TF(1e-5, 1e-6), TM(1e-5), 0},
    {"rope_fwd", "qkv", {8, 2, 4, 16}, {2, 16, 0, 100}, {10000}, BF16, TX, TM(B8), 0},
    {"rope_bwd", "dqkv", {8, 2, 4, 16}, {1, 8, 1, 3}, {10000}, BF16, TX, TM(B8), 0},
    /* ---- qk_layernorm: ne {rows, np, ng, hn}, ip[0] = rms ---- */
    {"qknorm_fwd", "y", {7, 4, 2, 9}, {0}, {0}, F32, TF(1e-5, 1e-5), TM(1e-5), DET},
    {"qknorm_fwd", "mean", {7, 4, 2, 9}, {0}, {0}, F32, TF(1e-5, 1e-6), TM(1e-4), 0},
    {"qknorm_fwd", "rstd", {7, 4, 2, 9}, {0}, {0}, F32, TF(1e-5, 0), TM(1e-5), 0},
    {"qknorm_fwd", "y", {7, 3, 1, 9}, {1}, {0}, F32, TF(1e-5, 1e-5), TM(1e-5), DET},
    {"qknorm_fwd", "rstd", {7, 3, 1, 9}, {1}, {0}, F32, TF(1e-5, 0), TM(1e-5), 0},
    {"qknorm_fwd", "y", {40, 4, 4, 16}, {0}, {0}, BF16, TX, TM(B8), 0},
    {"qknorm_fwd", "y", {40, 4, 2, 16}, {1}, {0}, BF16, TX, TM(B8), 0},
    {"qknorm_bwd", "din", {5, 4, 2, 6}, {0}, {0}, F32, TG(1e-3), TM(1e-5), 0},
    {"qknorm_bwd", "dwq", {5, 4, 2, 6}, {0}, {0}, F32, TG(1e-3), TM(1e-5), 0},
    {"qknorm_bwd", "dbq", {5, 4, 2, 6}, {0}, {0}, F32, TG(1e-3), TM(1e-5), 0},
    {"qknorm_bwd", "dwk", {5, 4, 2, 6}, {0}, {0}, F32, TG(1e-3), TM(1e-5), 0},
    {"qknorm_bwd", "dbk", {5, 4, 2, 6}, {0}, {0}, F32, TG(1e-3), TM(1e-5), 0},
    {"qknorm_bwd", "din_a", {5, 4, 2, 6}, {0}, {0}, F32, TF(1e-5, 1e-6), TM(1e-5), 0},
    {"qknorm_bwd", "dwk_a", {5, 4, 2, 6}, {0}, {0}, F32, TF(1e-5, 1e-6), TM(1e-5), 0},
    {"qknorm_bwd", "din", {5, 3, 3, 7}, {1}, {0}, F32, TG(1e-3), TM(1e-5), 0},
    {"qknorm_bwd", "dwq", {5, 3, 3, 7}, {1}, {0}, F32, TG(1e-3), TM(1e-5), 0},
    {"qknorm_bwd", "dwk", {5, 3, 3, 7}, {1}, {0}, F32, TG(1e-3), TM(1e-5), 0},
    {"qknorm_bwd", "din_a", {5, 3, 3, 7}, {1}, {0}, F32, TF(1e-5, 1e-6), TM(1e-5), 0},
    {"qknorm_bwd", "dwq_a", {5, 3, 3, 7}, {1}, {0}, F32, TF(1e-5, 1e-6), TM(1e-5), 0},
    {"qknorm_bwd", "din", {70, 4, 1, 5}, {0}, {0}, F32, TG(1e-3), TM(1e-5), DET},
    {"qknorm_bwd", "dwq", {70, 4, 1, 5}, {0}, {0}, F32, TG(1e-3), TM(1e-5), DET},
    {"qknorm_bwd", "dbk", {70, 4, 1, 5}, {0}, {0}, F32, TG(1e-3), TM(1e-5), DET},
    {"qknorm_bwd", "din", {40, 4, 2, 16}, {0}, {0}, BF16, TX, TM(B6), 0},
    {"qknorm_bwd", "dwk", {40, 4, 2, 16}, {1}, {0}, BF16, TX, TM(1e-5), 0},
    /* ---- attention (the op table has only the fused op since issue 15; the
     * unfused reference is tests/tools/attn_unfused.h) ---- */
    /* ---- fused attention (FlashAttention-2): ne {s, b, np, hn}, ip {ng (0 = np),
     * cp, rank, kr, hv (0 = hn)}, fp[0] = dropout p; cp >= 1: rank's chunks {rank, 2cp-1-rank}
     * of c = s/2 rows, kr the key block (== rank: kv NULL; other: the kv form;
     * rank + cp: own keys through kv); op_runners_flash.h ---- */
    {"flash_attn_fwd", "ctx", {13, 2, 3, 6}, {0}, {0}, F32, TF(1e-5, 1e-6), TM(1e-5), DET},
    {"flash_attn_fwd", "lse", {13, 2, 3, 6}, {0}, {0}, F32, TF(1e-5, 1e-6), TM(1e-5), DET},
    {"flash_attn_fwd", "ctx", {13, 2, 3, 6}, {0}, {0.3f}, F32, TF(1e-5, 1e-6), TM(1e-5), DET},
    {"flash_attn_fwd", "ctx", {70, 1, 2, 8}, {0}, {0.2f}, F32, TF(1e-5, 1e-6), TM(1e-5), DET},
    {"flash_attn_fwd", "lse", {70, 1, 2, 8}, {0}, {0.2f}, F32, TF(1e-5, 1e-6), TM(1e-5), 0},
    {"flash_attn_fwd", "ctx", {130, 1, 2, 4}, {1}, {0.1f}, F32, TF(1e-5, 1e-6), TM(1e-5), DET},
    {"flash_attn_fwd", "ctx", {1, 3, 4, 5}, {2}, {0.3f}, F32, TF(1e-5, 1e-6), TM(1e-5), DET},
    {"flash_attn_fwd", "lse", {1, 3, 4, 5}, {2}, {0.3f}, F32, TF(1e-5, 1e-6), TM(1e-5), 0},
    {"flash_attn_fwd", "ctx", {5, 8, 16, 4}, {0}, {0.1f}, F32, TF(1e-5, 1e-6), TM(1e-5), DET},
    {"flash_attn_fwd", "ctx", {11, 2, 4, 5}, {1}, {0}, F32, TF(1e-5, 1e-6), TM(1e-5), DET},
    {"flash_attn_fwd", "ctx", {11, 2, 4, 5}, {2}, {0.3f}, F32, TF(1e-5, 1e-6), TM(1e-5), DET},
    {"flash_attn_fwd", "ctx", {11, 2, 4, 5}, {4}, {0.3f}, F32, TF(1e-5, 1e-6), TM(1e-5), DET},
    {"flash_attn_fwd", "ctx", {8, 2, 3, 4}, {0, 1, 0, 1}, {0.3f}, F32, TF(1e-5, 1e-6), TM(1e-5), DET},
    {"flash_attn_fwd", "ctx", {6, 2, 4, 5}, {2, 2, 0, 0}, {0.3f}, F32, TF(1e-5, 1e-6), TM(1e-5), DET},
    {"flash_attn_fwd", "ctx", {6, 2, 4, 5}, {2, 2, 0, 1}, {0.3f}, F32, TF(1e-5, 1e-6), TM(1e-5), DET},
    {"flash_attn_fwd", "lse", {6, 2, 4, 5}, {2, 2, 0, 1}, {0.3f}, F32, TF(1e-5, 1e-6), TM(1e-5), 0},
    {"flash_attn_fwd", "ctx", {6, 2, 4, 5}, {2, 2, 1, 0}, {0.3f}, F32, TF(1e-5, 1e-6), TM(1e-5), DET},
    {"flash_attn_fwd", "ctx", {6, 2, 4, 5}, {2, 2, 0, 2}, {0.3f}, F32, TF(1e-5, 1e-6), TM(1e-5), DET},
    {"flash_attn_fwd", "ctx", {66, 1, 2, 4}, {1, 2, 1, 0}, {0.1f}, F32, TF(1e-5, 1e-6), TM(1e-5), DET},
    {"flash_attn_fwd", "lse", {66, 1, 2, 4}, {1, 2, 1, 1}, {0.1f}, F32, TF(1e-5, 1e-6), TM(1e-5), 0},
    {"flash_attn_bwd", "dqkv", {9, 2, 3, 5}, {0}, {0}, F32, TG(1e-3), TM(1e-5), DET},
    {"flash_attn_bwd", "dqkv", {9, 2, 3, 5}, {0}, {0.2f}, F32, TG(1e-3), TM(1e-5), DET},
    {"flash_attn_bwd", "dqkv", {9, 2, 4, 5}, {1}, {0.2f}, F32, TG(1e-3), TM(1e-5), DET},
    {"flash_attn_bwd", "dqkv", {9, 2, 4, 5}, {2}, {0}, F32, TG(1e-3), TM(1e-5), DET},
    {"flash_attn_bwd", "dqkv", {7, 3, 6, 3}, {3}, {0.2f}, F32, TG(1e-3), TM(1e-5), DET},
    {"flash_attn_bwd", "dqkv", {1, 2, 2, 3}, {0}, {0.2f}, F32, TG(1e-3), TM(1e-5), DET},
    {"flash_attn_bwd", "dqkv", {70, 1, 2, 4}, {1}, {0.1f}, F32, TG(1e-3), TM(1e-5), DET},
    {"flash_attn_bwd", "dqkv", {6, 2, 4, 5}, {2, 2, 0, 0}, {0.2f}, F32, TG(1e-3), TM(1e-5), DET},
    {"flash_attn_bwd", "dqkv", {6, 2, 4, 5}, {2, 2, 0, 1}, {0.2f}, F32, TG(1e-3), TM(1e-5), DET},
    {"flash_attn_bwd", "dkv", {6, 2, 4, 5}, {2, 2, 0, 1}, {0.2f}, F32, TG(1e-3), TM(1e-5), DET},
    {"flash_attn_bwd", "dqkv", {6, 2, 4, 5}, {2, 2, 1, 0}, {0}, F32, TG(1e-3), TM(1e-5), DET},
    {"flash_attn_bwd", "dkv", {6, 2, 4, 5}, {2, 2, 1, 0}, {0.2f}, F32, TG(1e-3), TM(1e-5), DET},
    {"flash_attn_bwd", "dkv", {6, 2, 4, 5}, {2, 2, 0, 2}, {0.2f}, F32, TG(1e-3), TM(1e-5), DET},
    {"flash_attn_bwd", "dqkv", {66, 1, 2, 4}, {1, 2, 1, 0}, {0.1f}, F32, TG(1e-3), TM(1e-5), DET},
    {"flash_attn_bwd", "dkv", {66, 1, 2, 4}, {1, 2, 1, 0}, {0.1f}, F32, TG(1e-3), TM(1e-5), DET},
    /* one CP rank's ring: own block, the others merged in ring order, backward */
    {"flash_attn_ring", "ctx", {6, 2, 4, 5}, {2, 2, 0}, {0.2f}, F32, TF(1e-5, 1e-6), TM(1e-5), DET},
    {"flash_attn_ring", "lse", {6, 2, 4, 5}, {2, 2, 0}, {0.2f}, F32, TF(1e-5, 1e-6), TM(1e-5), 0},
    {"flash_attn_ring", "dqkv", {6, 2, 4, 5}, {2, 2, 0}, {0.2f}, F32, TG(1e-3), TM(1e-5), DET},
    {"flash_attn_ring", "dkv", {6, 2, 4, 5}, {2, 2, 0}, {0.2f}, F32, TG(1e-3), TM(1e-5), DET},
    {"flash_attn_ring", "dqkv", {6, 2, 4, 5}, {2, 2, 1}, {0.2f}, F32, TG(1e-3), TM(1e-5), 0},
    {"flash_attn_ring", "dkv", {6, 2, 4, 5}, {2, 2, 1}, {0.2f}, F32, TG(1e-3), TM(1e-5), 0},
    {"flash_attn_ring", "ctx", {4, 1, 2, 3}, {1, 4, 1}, {0.2f}, F32, TF(1e-5, 1e-6), TM(1e-5), DET},
    {"flash_attn_ring", "dqkv", {4, 1, 2, 3}, {1, 4, 1}, {0.2f}, F32, TG(1e-3), TM(1e-5), 0},
    {"flash_attn_ring", "dkv", {4, 1, 2, 3}, {1, 4, 2}, {0.2f}, F32, TG(1e-3), TM(1e-5), 0},
    {"flash_attn_ring", "dqkv", {6, 2, 2, 3}, {0, 1, 0}, {0.1f}, F32, TG(1e-3), TM(1e-5), 0},
    /* document masking (reset_attention_mask, mt_attn_desc.doc_start): fp[1] =
     * the fraction of positions that start a document (op_runners_flash.h) */
    {"flash_attn_fwd", "ctx", {13, 2, 3, 6}, {0}, {0.3f, 0.25f}, F32, TF(1e-5, 1e-6), TM(1e-5), DET},
    {"flash_attn_fwd", "lse", {13, 2, 3, 6}, {0}, {0.3f, 0.25f}, F32, TF(1e-5, 1e-6), TM(1e-5), 0},
    {"flash_attn_fwd", "ctx", {70, 1, 4, 8}, {2}, {0.2f, 0.04f}, F32, TF(1e-5, 1e-6), TM(1e-5), DET},
    {"flash_attn_fwd", "lse", {130, 2, 2, 4}, {1}, {0.1f, 0.02f}, F32, TF(1e-5, 1e-6), TM(1e-5), 0},
    {"flash_attn_fwd", "ctx", {6, 2, 4, 5}, {2, 2, 0, 1}, {0.3f, 0.3f}, F32, TF(1e-5, 1e-6), TM(1e-5), DET},
    {"flash_attn_fwd", "lse", {6, 2, 4, 5}, {2, 2, 1, 0}, {0.3f, 0.3f}, F32, TF(1e-5, 1e-6), TM(1e-5), 0},
    {"flash_attn_fwd", "ctx", {66, 1, 2, 4}, {1, 2, 1, 0}, {0.1f, 0.05f}, F32, TF(1e-5, 1e-6), TM(1e-5), DET},
    {"flash_attn_bwd", "dqkv", {9, 2, 3, 5}, {0}, {0.2f, 0.3f}, F32, TG(1e-3), TM(1e-5), DET},
    {"flash_attn_bwd", "dqkv", {70, 1, 2, 4}, {1}, {0.1f, 0.05f}, F32, TG(1e-3), TM(1e-5), DET},
    {"flash_attn_bwd", "dqkv", {6, 2, 4, 5}, {2, 2, 0, 1}, {0.2f, 0.3f}, F32, TG(1e-3), TM(1e-5), DET},
    {"flash_attn_bwd", "dkv", {6, 2, 4, 5}, {2, 2, 1, 0}, {0.2f, 0.3f}, F32, TG(1e-3), TM(1e-5), DET},
    {"flash_attn_bwd", "dkv", {66, 1, 2, 4}, {1, 2, 1, 0}, {0.1f, 0.05f}, F32, TG(1e-3), TM(1e-5), DET},
    {"flash_attn_ring", "ctx", {6, 2, 4, 5}, {2, 2, 0}, {0.2f, 0.3f}, F32, TF(1e-5, 1e-6), TM(1e-5), DET},
    {"flash_attn_ring", "dqkv", {6, 2, 4, 5}, {2, 2, 1}, {0.2f, 0.3f}, F32, TG(1e-3), TM(1e-5), DET},
    {"flash_attn_ring", "dkv", {6, 2, 4, 5}, {2, 2, 0}, {0.2f, 0.3f}, F32, TG(1e-3), TM(1e-5), 0},
    {"flash_attn_ring", "lse", {4, 1, 2, 3}, {1, 4, 2}, {0.2f, 0.3f}, F32, TF(1e-5, 1e-6), TM(1e-5), 0},
    {"flash_attn_ring", "dkv", {4, 1, 2, 3}, {1, 4, 1}, {0.2f, 0.3f}, F32, TG(1e-3), TM(1e-5), 0},
    /* value width hv != hn (multi-latent attention: ip[4] = hv, the value
     * head of each query group hv wide, ctx [s, b, np, hv]; op_runners_flash.h):
     * hv < hn and hv > hn, one key head per query (MLA) and GQA, causal,
     * dropout, the kv form of a CP block and the ring */
    {"flash_attn_fwd", "ctx", {13, 2, 3, 6}, {0, 0, 0, 0, 4}, {0.3f}, F32, TF(1e-5, 1e-6), TM(1e-5), DET},
    {"flash_attn_fwd", "lse", {13, 2, 3, 6}, {0, 0, 0, 0, 4}, {0.3f}, F32, TF(1e-5, 1e-6), TM(1e-5), 0},
    {"flash_attn_fwd", "ctx", {11, 2, 4, 5}, {2, 0, 0, 0, 7}, {0.3f}, F32, TF(1e-5, 1e-6), TM(1e-5), DET},
    {"flash_attn_fwd", "ctx", {6, 2, 4, 5}, {2, 2, 0, 1, 3}, {0.3f}, F32, TF(1e-5, 1e-6), TM(1e-5), DET},
    {"flash_attn_bwd", "dqkv", {9, 2, 3, 5}, {0, 0, 0, 0, 3}, {0.2f}, F32, TG(1e-3), TM(1e-5), DET},
    {"flash_attn_bwd", "dqkv", {9, 2, 4, 5}, {2, 0, 0, 0, 8}, {0.2f}, F32, TG(1e-3), TM(1e-5), DET},
    {"flash_attn_bwd", "dqkv", {6, 2, 4, 5}, {2, 2, 0, 1, 7}, {0.2f}, F32, TG(1e-3), TM(1e-5), DET},
    {"flash_attn_bwd", "dkv", {6, 2, 4, 5}, {2, 2, 0, 1, 7}, {0.2f}, F32, TG(1e-3), TM(1e-5), DET},
    {"flash_attn_ring", "ctx", {6, 2, 4, 5}, {2, 2, 1, 0, 3}, {0.2f}, F32, TF(1e-5, 1e-6), TM(1e-5), DET},
    {"attn_merge", "ctx", {13, 2, 3, 6}, {0, 0, 0, 0, 4}, {0.2f}, F32, TM(1e-6), TM(1e-5), DET},
    /* merging two disjoint key blocks = one call over both */
    {"attn_merge", "ctx", {13, 2, 3, 6}, {0}, {0}, F32, TM(1e-6), TM(1e-5), DET},
    {"attn_merge", "lse", {13, 2, 3, 6}, {0}, {0}, F32, TF(1e-6, 1e-6), TM(1e-5), 0},
    {"attn_merge", "ctx", {70, 1, 4, 8}, {2}, {0.2f}, F32, TM(1e-6), TM(1e-5), DET},
    {"attn_merge", "lse", {70, 1, 4, 8}, {2}, {0.2f}, F32, TF(1e-6, 1e-6), TM(1e-5), 0},
    /* fused = unfused within fp32 rounding (want: the unfused reference op,
     * tests/tools/attn_unfused.h; cpu column) */
    {"flash_vs_unfused", "ctx", {13, 2, 3, 6}, {0}, {0}, F32, TM(1e-6), TM(1e-5), DET},
    {"flash_vs_unfused", "dqkv", {13, 2, 3, 6}, {0}, {0}, F32, TM(1e-6), TM(1e-5), DET},
    {"flash_vs_unfused", "ctx", {13, 2, 3, 6}, {0}, {0.3f}, F32, TM(1e-6), TM(1e-5), 0},
    {"flash_vs_unfused", "dqkv", {13, 2, 3, 6}, {0}, {0.3f}, F32, TM(1e-6), TM(1e-5), 0},
    {"flash_vs_unfused", "ctx", {11, 2, 4, 5}, {2}, {0.2f}, F32, TM(1e-6), TM(1e-5), 0},
    {"flash_vs_unfused", "dqkv", {11, 2, 4, 5}, {1}, {0.2f}, F32, TM(1e-6), TM(1e-5), 0},
    {"flash_vs_unfused", "ctx", {150, 2, 2, 16}, {0}, {0.1f}, F32, TM(1e-6), TM(1e-5), 0},
    {"flash_vs_unfused", "dqkv", {150, 2, 2, 16}, {0}, {0.1f}, F32, TM(1e-6), TM(1e-5), DET},
    {"flash_vs_unfused", "dqkv", {300, 1, 2, 8}, {1}, {0.1f}, F32, TM(1e-6), TM(1e-5), DET},
    {"flash_attn_fwd", "ctx", {16, 2, 4, 8}, {2}, {0.1f}, BF16, TX, TM(B5), 0},
    {"flash_attn_fwd", "lse", {16, 2, 4, 8}, {2}, {0.1f}, BF16, TX, TM(B5), 0},
    {"flash_attn_bwd", "dqkv", {16, 2, 2, 8}, {0}, {0.1f}, BF16, TX, TM(B5), 0},
    {"flash_attn_bwd", "dkv", {8, 2, 4, 8}, {2, 2, 1, 0}, {0.1f}, BF16, TX, TM(B5), 0},
    {"flash_attn_ring", "ctx", {8, 2, 2, 8}, {0, 2, 1}, {0.1f}, BF16, TX, TM(B5), CHAIN},
    {"flash_attn_ring", "dqkv", {8, 2, 2, 8}, {0, 2, 1}, {0.1f}, BF16, TX, TM(B5), CHAIN},
    {"flash_attn_fwd", "ctx", {16, 2, 4, 8}, {2}, {0.1f, 0.2f}, BF16, TX, TM(B5), 0},
    {"flash_attn_fwd", "ctx", {80, 1, 2, 16}, {1}, {0.1f, 0.03f}, BF16, TX, TM(B5), 0},
    {"flash_attn_bwd", "dqkv", {16, 2, 2, 8}, {0}, {0.1f, 0.2f}, BF16, TX, TM(B5), 0},
    {"flash_attn_bwd", "dqkv", {80, 1, 2, 16}, {1}, {0.1f, 0.03f}, BF16, TX, TM(B5), 0},
    {"flash_attn_bwd", "dkv", {8, 2, 4, 8}, {2, 2, 1, 0}, {0.1f, 0.25f}, BF16, TX, TM(B5), 0},
    {"flash_attn_fwd", "ctx", {16, 2, 4, 12}, {0, 0, 0, 0, 8}, {0.1f}, BF16, TX, TM(B5), 0},
    {"flash_attn_fwd", "ctx", {16, 2, 4, 8}, {2, 0, 0, 0, 12}, {0.1f}, BF16, TX, TM(B5), 0},
    {"flash_attn_bwd", "dqkv", {16, 2, 4, 12}, {0, 0, 0, 0, 8}, {0.1f}, BF16, TX, TM(B5), 0},
    {"flash_attn_bwd", "dkv", {8, 2, 4, 8}, {2, 2, 1, 0, 12}, {0.1f}, BF16, TX, TM(B5), 0},
    /* ---- dropout: ne {s, b, h}, ip {s_off, s_full, h_off, h_full}, fp {p, unit} ---- */
    {"dropout_add_fwd", "out", {64, 4, 256}, {0, 64, 0, 256}, {0.3f, 1}, F32, TX, TM(1e-5), MASK},
    {"dropout_add_fwd", "out", {24, 4, 80}, {16, 64, 96, 256}, {0.3f, 1}, F32, TX, TM(1e-5), MASK},
    {"dropout_add_fwd", "out", {9, 2, 37}, {2, 16, 3, 50}, {0.25f, 0}, F32, TF(1e-6, 1e-6), TM(1e-5), 0},
    {"dropout_add_fwd", "out", {9, 2, 37}, {0, 9, 0, 37}, {0, 1}, F32, TX, TM(0), 0},
    {"dropout_bwd", "dx", {64, 4, 256}, {0, 64, 0, 256}, {0.3f, 1}, F32, TX, TM(1e-5), MASK},
    {"dropout_bwd", "dx", {9, 2, 37}, {2, 16, 3, 50}, {0.25f, 0}, F32, TF(1e-6, 1e-6), TM(1e-5), 0},
    {"dropout_add_fwd", "out", {8, 2, 24}, {3, 16, 8, 48}, {0.3f, 0}, BF16, TX, TM(B8), 0},
    {"dropout_bwd", "dx", {8, 2, 24}, {3, 16, 8, 48}, {0.3f, 1}, BF16, TX, TM(B8), MASK},
    /* ---- embeddings: ne {n, h, v_start, v_end} / {s, b, h, s_offset} ---- */
    {"embedding_fwd", "out", {23, 19, 10, 27}, {0}, {0}, F32, TX, TM(0), 0},
    {"embedding_fwd", "out", {40, 20, 5, 25}, {0}, {0}, BF16, TX, TM(0), 0},
    {"embedding_bwd", "dw", {41, 21, 8, 25}, {0}, {0}, F32, TF(1e-5, 1e-6), TM(1e-6), 0},
    {"embedding_bwd", "dw", {40, 20, 5, 25}, {0}, {0}, BF16, TX, TM(1e-6), 0},
    {"pos_embedding_fwd", "x", {5, 3, 19, 2}, {0}, {0}, F32, TX, TM(1e-5), 0},
    {"pos_embedding_fwd", "x", {8, 3, 20, 4}, {0}, {0}, BF16, TX, TM(B8), 0},
    {"pos_embedding_bwd", "dwpe", {6, 3, 17, 4}, {0}, {0}, F32, TF(1e-5, 1e-6), TM(1e-6), 0},
    {"pos_embedding_bwd", "dwpe", {8, 3, 20, 4}, {0}, {0}, BF16, TX, TM(1e-6), 0},
    /* ---- cross-entropy: ne {n, vl, valid, v_start}, fp[0] = backward scale ---- */
    {"xent_max", "max", {9, 45, 37, 100}, {0}, {0.125f}, F32, TX, TM(0), 0},
    {"xent_stats", "sumexp", {9, 45, 37, 100}, {0}, {0.125f}, F32, TF(1e-5, 0), TM(1e-5), 0},
    {"xent_stats", "tgt_logit", {9, 45, 37, 100}, {0}, {0.125f}, F32, TX, TM(0), 0},
    {"xent_loss", "loss", {9, 45, 37, 100}, {0}, {0.125f}, F32, TF(1e-5, 1e-6), TM(1e-5), 0},
    {"xent_bwd", "dlogits", {7, 29, 23, 50}, {0}, {0.125f}, F32, TG(1e-3), TM(1e-5), 0},
    /* ip[0] = 1: loss mask (eod_mask_loss), rows i % 3 == 1 masked */
    {"xent_loss", "loss", {9, 45, 37, 100}, {1}, {0.125f}, F32, TF(1e-5, 1e-6), TM(1e-5), 0},
    {"xent_bwd", "dlogits", {7, 29, 23, 50}, {1}, {0.125f}, F32, TG(1e-3), TM(1e-5), 0},
    {"xent_bwd", "dlogits", {6, 50, 45, 100}, {1}, {0.25f}, BF16, TX, TM(B8), 0},
    {"xent_max", "max", {6, 50, 45, 100}, {0}, {0.25f}, BF16, TX, TM(0), 0},
    {"xent_stats", "sumexp", {6, 50, 45, 100}, {0}, {0.25f}, BF16, TX, TM(1e-5), 0},
    {"xent_stats", "tgt_logit", {6, 50, 45, 100}, {0}, {0.25f}, BF16, TX, TM(0), 0},
    {"xent_loss", "loss", {6, 50, 45, 100}, {0}, {0.25f}, BF16, TX, TM(1e-5), 0},
    {"xent_bwd", "dlogits", {6, 50, 45, 100}, {0}, {0.25f}, BF16, TX, TM(B8), 0},
    /* ---- elementwise and reductions: ne {n}, fp[0] = alpha ---- */
    {"add", "out", {100003}, {0}, {0.25f}, F32, TX, TM(1e-5), 0},
    {"axpy_f32", "y", {100003}, {0}, {0.25f}, F32, TX, TM(1e-6), 0},
    {"scale_f32", "x", {100003}, {0}, {-3}, F32, TX, TM(1e-6), 0},
    {"add", "out", {5000}, {0}, {0.3f}, BF16, TX, TM(B8), 0},
    {"axpy_f32", "y", {5000}, {0}, {0.3f}, BF16, TX, TM(1e-6), 0},
    {"scale_f32", "x", {5000}, {0}, {-1.7f}, BF16, TX, TM(1e-6), 0},
    {"sum_f32", "sum", {100003}, {0}, {0}, F32, TF(0, 3e-5), TF(1e-10, 0), DET},
    {"sumsq_f32", "sumsq", {100003}, {0}, {0}, F32, TF(1e-12, 0), TF(1e-10, 0), DET},
    {"sumsq_f32", "sumsq", {3000001}, {0}, {0}, F32, TF(1e-12, 0), TF(1e-10, 0), 0},
    {"sumsq_acc_f32", "acc", {100003}, {0}, {0}, F32, TF(1e-12, 0), TF(1e-10, 0), DET},
    {"sumsq_acc_f32", "acc", {2}, {0}, {0}, F32, TF(1e-12, 0), TF(1e-10, 0), 0},
    /* ---- MoE row ops: ne {n_tok, k, h, rows}, ip[0] = no weights ---- */
    {"moe_gather_rows", "gather", {5, 2, 12, 10}, {0}, {0}, F32, TX, TM(0), 0},
    {"moe_combine_fwd", "y", {5, 2, 12, 10}, {0}, {0}, F32, TF(1e-6, 1e-7), TM(1e-5), 0},
    {"moe_combine_fwd", "y", {5, 2, 12, 10}, {1}, {0}, F32, TF(1e-6, 1e-7), TM(1e-5), 0},
    {"moe_combine_bwd", "dsrc", {5, 2, 12, 10}, {0}, {0}, F32, TF(1e-6, 0), TM(1e-5), 0},
    {"moe_combine_bwd", "dw", {5, 2, 12, 10}, {0}, {0}, F32, TF(1e-5, 1e-7), TM(1e-5), 0},
    {"moe_gather_rows", "gather", {5, 2, 12, 10}, {0}, {0}, BF16, TX, TM(0), 0},
    {"moe_combine_fwd", "y", {5, 2, 12, 10}, {0}, {0}, BF16, TX, TM(B8), 0},
    {"moe_combine_fwd", "y", {5, 2, 12, 10}, {1}, {0}, BF16, TX, TM(B8), 0},
    {"moe_combine_bwd", "dsrc", {5, 2, 12, 10}, {0}, {0}, BF16, TX, TM(B8), 0},
    {"moe_combine_bwd", "dw", {5, 2, 12, 10}, {0}, {0}, BF16, TX, TM(1e-5), 0},
    /* ---- AdamW: ne {n, step}, fp[0] = grad_scale ---- */
    {"adamw", "master", {50001, 7}, {0}, {0.5f}, F32, TF(1e-5, 1e-7), TM(1e-6), 0},
    {"adamw", "m", {50001, 7}, {0}, {0.5f}, F32, TF(1e-5, 1e-8), TM(1e-6), 0},
    {"adamw", "v", {50001, 7}, {0}, {0.5f}, F32, TF(1e-5, 1e-10), TM(1e-6), 0},
    {"adamw", "param_lowp", {50001, 7}, {0}, {0.5f}, F32, TF(1e-5, 1e-7), TM(1e-5), 0},
    {"adamw", "master", {5000, 3}, {0}, {0.8f}, BF16, TX, TM(1e-6), 0},
    {"adamw", "m", {5000, 3}, {0}, {0.8f}, BF16, TX, TM(1e-6), 0},
    {"adamw", "v", {5000, 3}, {0}, {0.8f}, BF16, TX, TM(1e-6), 0},
    {"adamw", "param_lowp", {5000, 3}, {0}, {0.8f}, BF16, TX, TM(B8), 0},
    /* ---- init / fill / cast: ne {rows, cols, ld_global}, ip {row_off, col_off} ---- */
    {"init_normal", "w", {11, 13, 13}, {0, 0}, {0}, F32, TX, TM(1e-5), 0},
    {"init_normal", "w", {6, 7, 13}, {3, 5}, {0}, F32, TX, TM(1e-5), 0},
    {"init_normal", "w", {7, 9, 20}, {3, 5}, {0}, BF16, TX, TM(B8), 0},
    {"fill", "fill", {1000}, {0}, {2.5f}, F32, TX, TM(0), 0},
    {"cast", "copy", {1000}, {0}, {2.5f}, F32, TX, TM(0), 0},
    {"cast", "bf16", {4096}, {0}, {2.5f}, F32, TX, TM(0), 0},
    {"fill", "fill", {63}, {0}, {3.3f}, BF16, TX, TM(B8), 0},
    /* ---- more bf16 storage rows (every column: cpu-bf16 and cuda) ----
     * batched GEMMs with every transpose, beta and padded C; the one-row
     * product; grouped GEMM with T C shared by groups (rounded per group:
     * CHAIN) */
    {"gemm", "c", {33, 40, 24, 3}, {1, 1, 1, 0}, {0.5f, 0.5f}, BF16, TX, TM(B8), 0},
    {"gemm", "c", {17, 9, 31, 2}, {1, 0, 0, 0}, {-0.5f, 1}, BF16, TX, TM(B8), 0},
    {"gemm", "c", {1, 37, 29, 2}, {0, 1, 1, 0}, {0.7f, 0.5f}, BF16, TX, TM(B8), 0},
    {"gemm", "c", {90, 171, 80, 1}, {0, 1, 1, 1}, {1, 1}, BF16, TX, TM(1e-5), 0},
    {"gemm_grouped", "c", {6, 24, 16, 13}, {1, 0, 0, 1}, {1, 1}, BF16, TX, TM(B6), CHAIN},
    {"gemm_grouped", "c", {5, 7, 6, 8}, {1, 1, 1, 2}, {-0.5f, 1}, BF16, TX, TM(B8), 0},
    /* accumulating backward ops over more rows than one chunk */
    {"layernorm_bwd", "din", {300, 40}, {0}, {0}, BF16, TX, TM(B6), 0},
    {"layernorm_bwd", "dw", {300, 40}, {0}, {0}, BF16, TX, TM(1e-5), 0},
    {"rmsnorm_bwd", "din", {300, 40}, {0}, {0}, BF16, TX, TM(B6), 0},
    {"qknorm_bwd", "din", {40, 4, 2, 16}, {1}, {0}, BF16, TX, TM(B6), 0},
    {"qknorm_bwd", "dbq", {40, 4, 2, 16}, {0}, {0}, BF16, TX, TM(1e-5), 0},
    /* attention: the kv form's dqkv (q heads accumulate), GQA/MQA, merge */
    {"flash_attn_bwd", "dqkv", {8, 2, 4, 8}, {2, 2, 1, 0}, {0.1f}, BF16, TX, TM(B5), 0},
    {"flash_attn_bwd", "dqkv", {16, 2, 4, 8}, {1}, {0}, BF16, TX, TM(B5), 0},
    {"flash_attn_fwd", "ctx", {8, 2, 4, 8}, {2, 2, 0, 1}, {0.1f}, BF16, TX, TM(B5), 0},
    {"flash_attn_fwd", "lse", {8, 2, 4, 8}, {2, 2, 0, 1}, {0.1f}, BF16, TX, TM(B5), 0},
    {"attn_merge", "ctx", {16, 2, 4, 8}, {2}, {0.1f}, BF16, TX, TM(B5), CHAIN},
    {"attn_merge", "lse", {16, 2, 4, 8}, {2}, {0.1f}, BF16, TX, TM(B5), CHAIN},
    /* masks: unit values show the zero pattern of the hidden dropout */
    {"dropout_add_fwd", "out", {16, 4, 64}, {0, 16, 0, 64}, {0.3f, 1}, BF16, TX, TM(B8), MASK},
    /* cross-entropy over a GPT-2 vocabulary: more rows than one widened block */
    {"xent_stats", "sumexp", {100, 50304, 50257, 0}, {0}, {0.25f}, BF16, TX, TM(1e-5), 0},
    {"xent_bwd", "dlogits", {100, 50304, 50257, 0}, {0}, {0.25f}, BF16, TX, TM(B8), 0},
    {"swiglu_bwd", "din", {37, 301}, {0}, {0}, BF16, TX, TM(B8), 0},
    {"rope_bwd", "dqkv", {5, 3, 3, 10}, {3, 4, 1, 1000}, {10000}, BF16, TX, TM(B8), 0},
    {"pos_embedding_fwd", "x", {5, 3, 19, 2}, {0}, {0}, BF16, TX, TM(B8), 0},
    {"cast", "bf16", {4096}, {0}, {2.5f}, BF16, TX, TM(0), 0},
    {"cast", "copy", {1000}, {0}, {2.5f}, BF16, TX, TM(0), 0},
    /* ---- fp8_quantize (amax, quantize, dequantize): ne {rows, cols}, ip {fmt, blocking,
     * pow2}; y = the round trip vs x within the format's half ulp (e4m3 2^-4, e5m2 2^-3
     * relative) plus the subnormal quantum (1e-5 of max|x|); amax exact; cuda bitwise ---- */
    {"fp8_quantize", "y", {37, 45}, {0, 0, 0}, {0}, F32, {1.0 / 16, 0, 1e-5}, TX, DET},
    {"fp8_quantize", "y", {37, 45}, {1, 0, 1}, {0}, F32, {1.0 / 8, 0, 1e-5}, TX, DET},
    {"fp8_quantize", "y", {5, 300}, {0, 1, 1}, {0}, F32, {1.0 / 16, 0, 1e-5}, TX, DET},
    {"fp8_quantize", "y", {5, 300}, {1, 1, 0}, {0}, F32, {1.0 / 8, 0, 1e-5}, TX, DET},
    {"fp8_quantize", "y", {200, 150}, {0, 2, 1}, {0}, F32, {1.0 / 16, 0, 1e-5}, TX, DET},
    {"fp8_quantize", "y", {9, 100}, {0, 3, 0}, {0}, F32, {1.0 / 16, 0, 1e-5}, TX, DET},
    {"fp8_quantize", "y", {9, 100}, {1, 3, 0}, {0}, F32, {1.0 / 8, 0, 1e-5}, TX, DET},
    {"fp8_quantize", "y", {200, 150}, {0, 2, 1}, {0}, BF16, {1.0 / 16, 0, 1e-5}, TX, 0},
    {"fp8_quantize", "y", {9, 100}, {0, 3, 0}, {0}, BF16, {1.0 / 16, 0, 1e-5}, TX, 0},
    /* ---- fp8_gemm (per-tensor FP8 operands): ne {m, n, k}, ip {trans_a, trans_b, a_fmt,
     * b_fmt, c_f32, bias}, fp {alpha, beta}: the FP8 linear's forward (TN), dgrad (e5m2 dy,
     * W transposed for cuBLASLt), wgrad (both transposed, fp32 accumulate); cuda runs
     * cuBLASLt's FP8 matmul (cpu: the dequantize path), the shape off 16 falls back ---- */
    {"fp8_gemm", "c", {32, 48, 64}, {0, 1, 0, 0, 0, 0}, {1, 0}, F32, TF(1e-5, 1e-5), TM(1e-5), 0},
    {"fp8_gemm", "c", {32, 64, 48}, {0, 0, 1, 0, 0, 0}, {1, 0}, F32, TF(1e-5, 1e-5), TM(1e-5), 0},
    {"fp8_gemm", "c", {48, 64, 32}, {1, 0, 1, 0, 1, 0}, {1, 1}, F32, TF(1e-5, 1e-5), TM(1e-5), 0},
    {"fp8_gemm", "c", {13, 7, 9}, {0, 1, 0, 1, 0, 1}, {0.5f, 0}, F32, TF(1e-5, 1e-5), TM(1e-5), 0},
    {"fp8_gemm", "c", {32, 48, 64}, {0, 1, 0, 0, 0, 1}, {1, 0}, BF16, TX, TM(B8), 0},
    {"fp8_gemm", "c", {48, 64, 32}, {1, 0, 1, 0, 1, 0}, {1, 1}, BF16, TX, TM(1e-5), 0},
};

#define OT_N_CASES (sizeof ot_cases / sizeof *ot_cases)

/* Runner of a backend op name (NULL when the harness has none). */
static ot_runner ot_runner_of(const char *op) {
  static const struct {
    const char *op;
    ot_runner fn;
  } map[] = {
      {"gemm", ot_run_gemm}, {"gemm_grouped", ot_run_gemm_grouped}, {"bias_grad", ot_run_bias_grad},
      {"layernorm_fwd", ot_run_layernorm_fwd}, {"layernorm_bwd", ot_run_layernorm_bwd},
      {"gelu_fwd", ot_run_gelu_fwd}, {"gelu_bwd", ot_run_gelu_bwd},
      {"rmsnorm_fwd", ot_run_rmsnorm_fwd}, {"rmsnorm_bwd", ot_run_rmsnorm_bwd},
      {"swiglu_fwd", ot_run_swiglu_fwd}, {"swiglu_bwd", ot_run_swiglu_bwd},
      {"rope_fwd", ot_run_rope_fwd}, {"rope_bwd", ot_run_rope_bwd},
      {"qknorm_fwd", ot_run_qknorm_fwd}, {"qknorm_bwd", ot_run_qknorm_bwd},
      {"flash_attn_fwd", ot_run_flash_fwd}, {"flash_attn_bwd", ot_run_flash_bwd},
      {"flash_attn_ring", ot_run_flash_ring}, {"attn_merge", ot_run_attn_merge},
      {"flash_vs_unfused", ot_run_flash_vs_unfused},
      {"dropout_add_fwd", ot_run_dropout_add_fwd}, {"dropout_bwd", ot_run_dropout_bwd},
      {"embedding_fwd", ot_run_embedding_fwd}, {"embedding_bwd", ot_run_embedding_bwd},
      {"pos_embedding_fwd", ot_run_pos_embedding_fwd}, {"pos_embedding_bwd", ot_run_pos_embedding_bwd},
      {"xent_max", ot_run_xent}, {"xent_stats", ot_run_xent}, {"xent_loss", ot_run_xent},
      {"xent_bwd", ot_run_xent}, {"add", ot_run_elementwise}, {"axpy_f32", ot_run_elementwise},
      {"scale_f32", ot_run_elementwise}, {"sum_f32", ot_run_reduce}, {"sumsq_f32", ot_run_reduce},
      {"sumsq_acc_f32", ot_run_sumsq_acc},
      {"moe_gather_rows", ot_run_moe}, {"moe_combine_fwd", ot_run_moe},
      {"moe_combine_bwd", ot_run_moe}, {"adamw", ot_run_adamw},
      {"init_normal", ot_run_init_normal}, {"fill", ot_run_fill_cast}, {"cast", ot_run_fill_cast},
      {"fp8_quantize", ot_run_fp8_quantize}, {"fp8_gemm", ot_run_fp8_gemm},
  };
  for (size_t i = 0; i < sizeof map / sizeof *map; i++)
    if (!strcmp(map[i].op, op)) return map[i].fn;
  return NULL;
}

/* Run every row whose op starts with `prefix` ("" = all) on cpu, the bf16
 * rows on cpu_bf16 (the cpu backend with bf16 storage) where non-NULL, and
 * on gpu[dtype] (fp32 / bf16 storage cuda backends) where non-NULL. Returns
 * the number of failed (row, backend) pairs; prints one line per failure and
 * a summary per column. */
static int ot_run_table(mt_backend *cpu, mt_backend *cpu_bf16, mt_backend *const gpu[2],
                        const char *prefix) {
  int fails = 0, ncpu = 0, nbf = 0, ngpu = 0;
  for (size_t i = 0; i < OT_N_CASES; i++) {
    const op_case *c = &ot_cases[i];
    if (strncmp(c->op, prefix, strlen(prefix))) continue;
    ot_runner fn = ot_runner_of(c->op);
    if (!fn) {
      printf("FAIL op=%s: no runner\n", c->op);
      fails++;
      continue;
    }
    uint64_t seed = 0x9E3779B97F4A7C15ull ^ ((uint64_t)(i + 1) * 0xD1B54A32D192ED03ull);
    if (c->dtype == MT_F32) {
      ncpu++;
      fails += !ot_case_cpu(cpu, c, fn, seed);
    }
    if (c->dtype == MT_BF16 && cpu_bf16) {
      nbf++;
      fails += !ot_case_vs_cpu(cpu, cpu_bf16, "cpu-bf16", c, fn, seed, !(c->flags & OT_CHAIN));
    }
    mt_backend *g = gpu && (c->dtype == MT_F32 || c->dtype == MT_BF16) ? gpu[c->dtype] : NULL;
    if (g && !(c->flags & OT_CPU)) {
      ngpu++;
      fails += !ot_case_gpu(cpu, g, c, fn, seed);
    }
  }
  printf("op cases '%s': %d on cpu, %d on cpu-bf16, %d on cuda, %d failed\n", prefix, ncpu, nbf,
         ngpu, fails);
  return fails;
}

#endif
