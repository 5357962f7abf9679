/* tests/unit/model/test_flops_docs.c — the core-attention term of
 * model/gpt_flops.h (issue 32): mt_gpt_seqlen_squared_sum over hand-made
 * samples (documents split after every end-of-document input token, as
 * reset_attention_mask masks them; an EOD in the last input position or the
 * first; off without reset_attention_mask), and the formulas' attention
 * terms worked by hand: paper - megatron = 6 L (np hn) B s^2 (the causal
 * half), and megatron with documents = megatron - 6 L (np hn) (B s^2 - sum
 * L_i^2). The whole formula against an independent count is
 * tests/integration/test_flops_formula.sh. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tests/unit/check.h"
#include <math.h>
#include <string.h>

#include "model/gpt.h"
#include "model/gpt_flops.h"

static mt_gpt_config docs_config(int reset) {
  mt_gpt_config c;
  memset(&c, 0, sizeof c);
  c.model.seq_length = 8;
  c.micro_batch_size = 3;
  c.eod_token = 0;
  c.reset_attention_mask = reset;
  return c;
}

static void test_seqlen_squared_sum(void **st) {
  (void)st;
  /* rows [b, s + 1]: the last column is the final target (never an input) */
  const int32_t tok[3 * 9] = {
      5, 0, 7, 7, 0, 9, 9, 9, 0, /* documents 2, 3, 3: 4 + 9 + 9 */
      1, 1, 1, 1, 1, 1, 1, 0, 0, /* EOD at the last input: one document of 8 */
      0, 1, 1, 1, 1, 1, 1, 1, 1, /* EOD first: 1 + 7^2 */
  };
  mt_gpt_config on = docs_config(1), off = docs_config(0);
  EXPECT(mt_gpt_seqlen_squared_sum(&on, tok) == 22.0 + 64.0 + 50.0, "%.17g",
         mt_gpt_seqlen_squared_sum(&on, tok));
  EXPECT(mt_gpt_seqlen_squared_sum(&off, tok) == 3.0 * 64.0, "%.17g",
         mt_gpt_seqlen_squared_sum(&off, tok));
}

static void test_attention_terms(void **st) {
  (void)st;
  const double B = 16, s = 512, L = 6, a = 8, hn = 40;
  mt_flops_shape m = {.global_batch = 16, .seq_length = 512, .num_layers = 6, .hidden_size = 256,
                      .num_attention_heads = 8, .kv_channels = 40, .ffn_hidden_size = 1000,
                      .padded_vocab_size = 50304};
  const double f_megatron = mt_flops_per_iteration(&m);
  mt_flops_shape p = m;
  p.formula = MT_FLOPS_PAPER;
  const double f_paper = mt_flops_per_iteration(&p);
  const double half = 6.0 * L * a * hn * B * s * s;
  EXPECT(fabs((f_paper - f_megatron) - half) <= 1e-12 * f_paper, "%.17g vs %.17g",
         f_paper - f_megatron, half);
  mt_flops_shape d = m;
  d.seqlen_squared_sum = 1000000.0; /* < B s^2 = 4194304 */
  const double f_docs = mt_flops_per_iteration(&d);
  EXPECT(fabs((f_megatron - f_docs) - 6.0 * L * a * hn * (B * s * s - 1e6)) <= 1e-12 * f_megatron,
         "%.17g", f_megatron - f_docs);
  /* the paper's count has no documents: sum L_i^2 does not change it */
  d.formula = MT_FLOPS_PAPER;
  EXPECT(mt_flops_per_iteration(&d) == f_paper, "%.17g", mt_flops_per_iteration(&d));
  /* forward parts: 3 x their sum is the iteration, under both formulas */
  mt_flops_shape *sh[3] = {&m, &p, &d};
  for (int i = 0; i < 3; i++) {
    mt_flops_parts fw;
    mt_flops_forward_parts(sh[i], &fw);
    const double sum = 3.0 * (fw.attn_linear + fw.attn_core + fw.mlp + fw.logits);
    const double want = mt_flops_per_iteration(sh[i]);
    EXPECT(fabs(sum - want) <= 1e-12 * want, "shape %d: %.17g vs %.17g", i, sum, want);
  }
  EXPECT(mt_flops_formula_from_name("megatron") == MT_FLOPS_MEGATRON, "%s", "megatron");
  EXPECT(mt_flops_formula_from_name("paper") == MT_FLOPS_PAPER, "%s", "paper");
  EXPECT(mt_flops_formula_from_name("causal") == -1, "%s", "causal");
}

/* Multi-latent attention, hand-worked: B 2, s 64, L 1, h 64, n 4 heads,
 * q_lora 16, kv_lora 8, qk_head_dim 12, qk_pos_emb_head_dim 4, v_head_dim
 * 10, ffn 128, Vp 256. Per token: q 16 (64 + 4·16 + 1) = 2064, kv 8 (64 +
 * 4 (12 + 10) + 1) = 1224, pos 64·4 = 256, proj 4·10·64 = 2560: 6104
 * multiply-adds; per attended pair 4 (16 + 10) = 104. MLP 2·64·128 = 16384
 * and logits 64·256 = 16384 per token. Megatron: 6 (128 (6104 + 32768) +
 * 104 · 2·64²/2); paper: the pairs are all 2·64². */
static void test_mla_terms(void **st) {
  (void)st;
  mt_flops_shape m = {.global_batch = 2, .seq_length = 64, .num_layers = 1, .hidden_size = 64,
                      .num_attention_heads = 4, .ffn_hidden_size = 128, .padded_vocab_size = 256,
                      .multi_latent_attention = 1, .q_lora_rank = 16, .kv_lora_rank = 8,
                      .qk_head_dim = 12, .qk_pos_emb_head_dim = 4, .v_head_dim = 10};
  const double tok = 128, pairs = 2.0 * 64 * 64;
  const double want_m = 6.0 * (tok * (6104 + 32768) + 104 * pairs / 2);
  const double want_p = 6.0 * (tok * (6104 + 32768) + 104 * pairs);
  EXPECT(mt_flops_per_iteration(&m) == want_m, "%.17g vs %.17g", mt_flops_per_iteration(&m), want_m);
  mt_flops_shape p = m;
  p.formula = MT_FLOPS_PAPER;
  EXPECT(mt_flops_per_iteration(&p) == want_p, "%.17g vs %.17g", mt_flops_per_iteration(&p), want_p);
  /* no q compression: q is one h -> n (12 + 4) projection, 64·64 = 4096 */
  mt_flops_shape d = m;
  d.q_lora_rank = 0;
  const double want_d = 6.0 * (tok * (4096 + 1224 + 256 + 2560 + 32768) + 104 * pairs / 2);
  EXPECT(mt_flops_per_iteration(&d) == want_d, "%.17g vs %.17g", mt_flops_per_iteration(&d), want_d);
  mt_flops_shape *sh[3] = {&m, &p, &d};
  for (int i = 0; i < 3; i++) {
    mt_flops_parts fw;
    mt_flops_forward_parts(sh[i], &fw);
    const double sum = 3.0 * (fw.attn_linear + fw.attn_core + fw.mlp + fw.logits);
    const double want = mt_flops_per_iteration(sh[i]);
    EXPECT(fabs(sum - want) <= 1e-12 * want, "MLA shape %d: %.17g vs %.17g", i, sum, want);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_seqlen_squared_sum),
      cmocka_unit_test(test_attention_terms),
      cmocka_unit_test(test_mla_terms),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
