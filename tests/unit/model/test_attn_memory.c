/* tests/unit/model/test_attn_memory.c — activation memory of the fused attention
 * against the unfused one (issue 15), from the allocator, for the GPT-2 124M
 * shape (12 layers, hidden 768, 12 heads, ffn 3072, vocabulary 50257 padded
 * to 50304, fp32) at seq 1024 and 2048, micro-batch 1, one process:
 *
 *  - fused (the model as it runs): the bytes of one micro-batch's activation
 *    slot (allocated when the micro-batch begins) equal docs/memory.md's
 *    formula, in which each layer keeps the log-sum-exp 4·b·a·s bytes and no
 *    [b, a, s, s] probabilities;
 *  - unfused: the same model run through the reference unfused op
 *    (tests/tools/attn_unfused.h), which keeps each layer's probabilities
 *    (MT_MEM_ACT) from its forward to its backward as the unfused model did.
 *    The allocator's activation peak over one training forward equals the
 *    fused slot + L·4·b·a·s² — every layer's probabilities alive at the end
 *    of the forward. The unfused MODEL kept no lse, so its peak is that
 *    minus L·4·b·a·s (printed as "unfused").
 * The forward of the unfused run is real (a few seconds at seq 2048); the
 * fused side needs no compute (the slot is allocated at begin). CI measures
 * seq 1024 (both checks); MEGATRAIN_TEST_FULL=1 adds seq 2048. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "backends/registry.h"
#include "core/util.h"
#include "model/gpt.h"
#include "tests/tools/attn_unfused.h"
#include "tests/tools/tiny_gpt.h"

/* docs/memory.md, GPT-2 block, t = 1, no recompute: one micro-batch slot. */
static int64_t fused_slot_bytes(const mt_gpt_config *c) {
  const int64_t s = c->model.seq_length, b = c->micro_batch_size, h = c->model.hidden_size;
  const int64_t f = c->model.ffn_hidden_size, a = c->model.num_attention_heads;
  const int64_t L = c->model.num_layers;
  const int64_t layer = 3 * s * b * h   /* ln1, x1, ln2 */
                        + 4 * s * b     /* LayerNorm means and rstds */
                        + 4 * s * b * h /* qkv and ctx */
                        + 2 * s * b * f /* fc1 and GELU output */
                        + b * a * s;    /* lse (fp32) */
  int64_t total = L * layer + (L + 1) * s * b * h /* residual stream */
                  + s * b * h + 2 * s * b         /* final LayerNorm */
                  + s * b * c->padded_vocab_size  /* logits */
                  + 4 * s * b + 2 * s * b;        /* loss pieces, tokens, targets */
  return total * 4;
}

static void measure(mt_backend *be, int s) {
  mt_gpt_config c = mt_tiny_gpt(12, 768, 12, 3072, s, 50257, 1, 1234);
  c.padded_vocab_size = 50304;
  const int64_t L = c.model.num_layers, a = c.model.num_attention_heads, b = c.micro_batch_size;
  const int64_t probs = L * 4 * b * a * (int64_t)s * s, lse = L * 4 * b * a * s;
  int32_t *tok = mt_xcalloc((size_t)b * (s + 1), sizeof(int32_t));
  for (int64_t i = 0; i < b * (s + 1); i++) tok[i] = (int32_t)((i * 7919) % 50257);
  int64_t ids[1] = {0};

  /* fused: the slot as the model allocates it */
  mt_gpt *m = mt_gpt_create(be, &c);
  const size_t before = be->mem.live[MT_MEM_ACT]; /* no slot yet */
  mt_gpt_chunk_begin(m, 0, 0, tok, ids, 1);
  int64_t fused = (int64_t)(be->mem.live[MT_MEM_ACT] - before);
  mt_gpt_chunk_end(m, 0, 0);
  const int64_t want = fused_slot_bytes(&c);
  if (fused != want)
    fail_msg("seq %d fused: allocator %lld bytes, formula %lld", s, (long long)fused,
             (long long)want);

  /* unfused: one training forward through the reference op (the slot,
   * released above, is reused) */
  mt_unfused_attn u;
  mt_unfused_attn_install(&u, be);
  mt_mem_reset_peak(&be->mem);
  double t0 = mt_now();
  mt_gpt_chunk_begin(m, 0, 1, tok, ids, 1);
  mt_gpt_chunk_forward(m, 0, 1);
  int64_t peak = (int64_t)(be->mem.peak[MT_MEM_ACT] - before);
  double dt = mt_now() - t0;
  mt_unfused_attn_uninstall(&u, be); /* frees the probabilities kept for the backward */
  mt_gpt_chunk_end(m, 0, 1);
  if (peak != want + probs)
    fail_msg("seq %d unfused: allocator peak %lld bytes, fused slot + L*4*b*a*s^2 = %lld", s,
             (long long)peak, (long long)(want + probs));
  print_message("GPT-2 124M, seq %d, micro-batch 1: fused %lld bytes (%.1f MiB), unfused %lld "
                "bytes (%.1f MiB; measured with lse %lld); ratio %.2f (unfused forward %.1f s)\n",
                s, (long long)fused, fused / 1048576.0, (long long)(peak - lse),
                (peak - lse) / 1048576.0, (long long)peak, (double)(peak - lse) / (double)fused,
                dt);
  mt_gpt_destroy(m);
  free(tok);
}

static void test_attn_memory_124m(void **state) {
  (void)state;
  char err[256];
  mt_backend_options o = {.device = "cpu", .num_threads = 0, .dtype = MT_F32};
  mt_backends_process_init(&o);
  mt_backend *be = mt_backend_create(&o, err, sizeof err);
  assert_non_null(be);
  measure(be, 1024);
  const char *full = getenv("MEGATRAIN_TEST_FULL");
  if (full && !strcmp(full, "1")) measure(be, 2048);
  mt_backend_destroy(be);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_attn_memory_124m)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
