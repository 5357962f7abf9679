/* tests/unit/model/test_gpt_flops_mtp.c — the multi-token prediction term of
 * model/gpt_flops.h against Megatron's num_floating_point_operations: with D
 * depths the layer counts grow by D (dense or MoE like the last layer), each
 * token adds 3 · 2 · D · (3h + 2h²) for the norms and eh_proj, and the logit
 * GEMM runs D + 1 times. So F(L, D) = F(L + D layers, no MTP) + 6 B s D
 * (3h + 2h²) + 6 B s D h Vp, for a dense model and for MoE models whose last
 * layer is MoE (the depths are MoE) or dense (the depths are dense). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tests/unit/check.h"
#include <math.h>

#include "model/gpt_flops.h"

static void check(const mt_flops_shape *with, const mt_flops_shape *grown, const char *what) {
  const double B = (double)with->global_batch, s = (double)with->seq_length;
  const double h = (double)with->hidden_size, D = (double)with->mtp_num_layers;
  const double want = mt_flops_per_iteration(grown) + 6.0 * B * s * D * (3.0 * h + 2.0 * h * h) +
                      6.0 * B * s * D * h * (double)with->padded_vocab_size;
  const double got = mt_flops_per_iteration(with);
  EXPECT(fabs(got - want) <= 1e-12 * want, "%s: %.9g vs %.9g", what, got, want);
}

static void test_mtp_flops(void **st) {
  (void)st;
  mt_flops_shape dense = {.global_batch = 8, .seq_length = 64, .num_layers = 4, .hidden_size = 128,
                          .num_attention_heads = 4, .num_query_groups = 2, .ffn_hidden_size = 384,
                          .swiglu = 1, .padded_vocab_size = 50304};
  mt_flops_shape a = dense, b = dense;
  a.mtp_num_layers = 2;
  b.num_layers = 6;
  check(&a, &b, "dense");
  /* MoE: layers 1..3 MoE of 4; the depths are MoE (last layer MoE) */
  mt_flops_shape moe = dense;
  moe.num_experts = 16;
  moe.moe_router_topk = 4;
  moe.moe_ffn_hidden_size = 64;
  moe.moe_shared_expert_intermediate_size = 128;
  moe.num_moe_layers = 3;
  a = moe, b = moe;
  a.mtp_num_layers = 1;
  a.mtp_moe = 1;
  b.num_layers = 5;
  b.num_moe_layers = 4;
  check(&a, &b, "moe, MoE depth");
  a.mtp_moe = 0; /* a dense last layer: a dense depth */
  b.num_moe_layers = 3;
  check(&a, &b, "moe, dense depth");
  /* the MTP FLOPs are not nothing: one depth costs more than one more layer */
  mt_flops_shape one = dense;
  one.mtp_num_layers = 1;
  b = dense;
  b.num_layers = 5;
  EXPECT(mt_flops_per_iteration(&one) > mt_flops_per_iteration(&b), "%s", "mtp > one layer");
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_mtp_flops)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
