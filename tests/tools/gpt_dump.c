/* tests/tools/gpt_dump.c — dumps a small GPT's initial parameters, one batch,
 * the loss and every parameter gradient, and a 10-step AdamW loss curve, for
 * the PyTorch parity test (tests/reference/test_gpt_parity.py).
 *
 * usage: gpt_dump OUTDIR [layers hidden heads seq batch vocab ffn untie steps]
 *                [KEY=VALUE ...]
 * KEY=VALUE arguments (anywhere after OUTDIR) set the Llama-style and MoE
 * options by their config-key names (tests/tools/gpt_options.h), e.g.
 * position_embedding_type=rope normalization=RMSNorm swiglu=1
 * num_query_groups=2 add_bias_linear=0 qk_layernorm=1 num_experts=4;
 * expert_bias_pattern=AMP (with moe_router_enable_expert_bias=1) fixes a
 * deterministic expert bias of amplitude AMP (meta.json "moe_expert_bias").
 * Writes OUTDIR/meta.json (with every option, for
 * tests/reference/llama_reference.py) and OUTDIR/<tensor>.bin (raw
 * little-endian).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>

#include "backends/registry.h"
#include "core/util.h"
#include "model/gpt.h"
#include "tests/tools/gpt_options.h"
#include "tests/tools/tiny_gpt.h"
#include "tests/tools/tool_util.h"
#include "optimizer/lr_schedule.h"
#include "tests/support/lr_at.h"
#include "optimizer/optimizer.h"

static void write_raw(const char *dir, const char *name, const void *p, size_t bytes) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s.bin", dir, name);
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(p, 1, bytes, f) != bytes) mt_fatal("cannot write %s", path);
  fclose(f);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: gpt_dump OUTDIR [layers hidden heads seq batch vocab ffn untie steps] "
                    "[KEY=VALUE ...]\n");
    return 2;
  }
  const char *dir = argv[1];
  int a[9] = {2, 64, 4, 16, 3, 500, 0, 0, 10};
  for (int i = 2, k = 0; i < argc; i++)
    if (!mt_gpt_is_option(argv[i]) && k < 9) a[k++] = atoi(argv[i]);
  mkdir(dir, 0755);
  char err[512];
  mt_backend *be = mt_tool_cpu_backend();
  mt_gpt_config c = mt_tiny_gpt(a[0], a[1], a[2], a[6] ? a[6] : 4 * a[1], a[3], a[5], a[4], 1234);
  c.model.untie_embeddings_and_output_weights = a[7];
  c.model.max_position_embeddings = c.model.seq_length + 3;
  double bias_amp = 0; /* expert_bias_pattern=AMP: a fixed expert bias (below) */
  /* documents (the data section's flags, model/gpt_docs.c): any of
   * reset_attention_mask=1 reset_position_ids=1 eod_mask_loss=1 makes about
   * one token in five the end-of-document token eod_token=N (default 7) */
  c.eod_token = 7;
  for (int i = 2; i < argc; i++)
    if (!strncmp(argv[i], "expert_bias_pattern=", 20))
      bias_amp = atof(argv[i] + 20);
    else if (!strncmp(argv[i], "reset_attention_mask=", 21))
      c.reset_attention_mask = atoi(argv[i] + 21);
    else if (!strncmp(argv[i], "reset_position_ids=", 19))
      c.reset_position_ids = atoi(argv[i] + 19);
    else if (!strncmp(argv[i], "eod_mask_loss=", 14))
      c.eod_mask_loss = atoi(argv[i] + 14);
    else if (!strncmp(argv[i], "eod_token=", 10))
      c.eod_token = atoi(argv[i] + 10);
    else if (!strncmp(argv[i], "apply_wd_to_qk_layernorm=", 25)) /* training key */
      c.apply_wd_to_qk_layernorm = atoi(argv[i] + 25);
    else if (mt_gpt_is_option(argv[i]) && mt_gpt_apply_option(&c, argv[i], err, sizeof err)) {
      fprintf(stderr, "gpt_dump: %s\n", err);
      return 2;
    }
  int steps = a[8];
  mt_gpt *m = mt_gpt_create(be, &c);
  /* expert bias (needs moe_router_enable_expert_bias=1): bias[i][e] =
   * AMP · (((5e + 3i) mod E) − (E−1)/2) / (E/2) for MoE layer i, held fixed (no
   * update: gpt_dump steps AdamW itself), written to meta.json */
  if (bias_amp != 0 && !c.model.moe_router_enable_expert_bias) {
    fprintf(stderr, "gpt_dump: expert_bias_pattern needs moe_router_enable_expert_bias=1\n");
    return 2;
  }
  cJSON *jbias = NULL;
  if (c.model.moe_router_enable_expert_bias) {
    jbias = cJSON_CreateArray();
    const int E = c.model.num_experts;
    for (int i = 0; i < mt_gpt_num_moe_layers(&c); i++) {
      float *bv = mt_gpt_moe_expert_bias(m, i);
      cJSON *row = cJSON_CreateArray();
      for (int e = 0; e < E; e++) {
        bv[e] = (float)(bias_amp * (((5 * e + 3 * i) % E) - (E - 1) / 2.0) / (E / 2.0));
        cJSON_AddItemToArray(row, cJSON_CreateNumber(bv[e]));
      }
      cJSON_AddItemToArray(jbias, row);
    }
  }
  const mt_param_list *pl = mt_gpt_params(m);
  float *host = mt_xmalloc((size_t)pl->numel * sizeof(float));

  cJSON *meta = cJSON_CreateObject();
  cJSON *jc = cJSON_AddObjectToObject(meta, "config");
  const mt_model_config *r = &mt_gpt_get_config(m)->model; /* derived sizes resolved */
  cJSON_AddNumberToObject(jc, "num_layers", r->num_layers);
  cJSON_AddNumberToObject(jc, "hidden_size", r->hidden_size);
  cJSON_AddNumberToObject(jc, "num_attention_heads", r->num_attention_heads);
  cJSON_AddNumberToObject(jc, "ffn_hidden_size", r->ffn_hidden_size);
  cJSON_AddNumberToObject(jc, "seq_length", r->seq_length);
  cJSON_AddNumberToObject(jc, "micro_batch_size", c.micro_batch_size);
  cJSON_AddNumberToObject(jc, "vocab_size", (double)r->vocab_size);
  cJSON_AddNumberToObject(jc, "padded_vocab_size", (double)c.padded_vocab_size);
  cJSON_AddNumberToObject(jc, "max_position_embeddings", r->max_position_embeddings);
  cJSON_AddBoolToObject(jc, "untie", r->untie_embeddings_and_output_weights);
  cJSON_AddStringToObject(jc, "position_embedding_type", r->position_embedding_type);
  cJSON_AddNumberToObject(jc, "rotary_base", r->rotary_base);
  cJSON_AddNumberToObject(jc, "rotary_percent", r->rotary_percent);
  cJSON_AddBoolToObject(jc, "rotary_interleaved", r->rotary_interleaved);
  if (r->use_rope_scaling) { /* Llama-3.1 frequency scaling (core/rope_freq.h) */
    cJSON_AddBoolToObject(jc, "use_rope_scaling", 1);
    cJSON_AddNumberToObject(jc, "rope_scaling_factor", r->rope_scaling_factor);
  }
  cJSON_AddStringToObject(jc, "normalization", r->normalization);
  cJSON_AddNumberToObject(jc, "norm_epsilon", r->norm_epsilon);
  cJSON_AddBoolToObject(jc, "swiglu", r->swiglu);
  cJSON_AddNumberToObject(jc, "num_query_groups", r->num_query_groups);
  cJSON_AddNumberToObject(jc, "kv_channels", r->kv_channels);
  cJSON_AddBoolToObject(jc, "add_bias_linear", r->add_bias_linear);
  cJSON_AddBoolToObject(jc, "qk_layernorm", r->qk_layernorm);
  if (c.apply_wd_to_qk_layernorm) cJSON_AddBoolToObject(jc, "apply_wd_to_qk_layernorm", 1);
  cJSON_AddNumberToObject(jc, "init_method_std", r->init_method_std);
  cJSON_AddNumberToObject(jc, "num_experts", r->num_experts);
  if (r->multi_latent_attention) { /* tests/reference/mla_reference.py */
    cJSON_AddBoolToObject(jc, "multi_latent_attention", 1);
    cJSON_AddNumberToObject(jc, "q_lora_rank", r->q_lora_rank);
    cJSON_AddNumberToObject(jc, "kv_lora_rank", r->kv_lora_rank);
    cJSON_AddNumberToObject(jc, "qk_head_dim", r->qk_head_dim);
    cJSON_AddNumberToObject(jc, "qk_pos_emb_head_dim", r->qk_pos_emb_head_dim);
    cJSON_AddNumberToObject(jc, "v_head_dim", r->v_head_dim);
    cJSON_AddStringToObject(jc, "rope_type", mt_model_yarn(r) ? "yarn" : "rope");
    cJSON_AddNumberToObject(jc, "rotary_scaling_factor", r->rotary_scaling_factor);
    cJSON_AddNumberToObject(jc, "original_max_position_embeddings",
                            r->original_max_position_embeddings);
    cJSON_AddNumberToObject(jc, "beta_fast", r->beta_fast);
    cJSON_AddNumberToObject(jc, "beta_slow", r->beta_slow);
    cJSON_AddNumberToObject(jc, "mscale", r->mscale);
    cJSON_AddNumberToObject(jc, "mscale_all_dim", r->mscale_all_dim);
  }
  if (r->mtp_num_layers > 0) {
    cJSON_AddNumberToObject(jc, "mtp_num_layers", r->mtp_num_layers);
    cJSON_AddNumberToObject(jc, "mtp_loss_scaling_factor", r->mtp_loss_scaling_factor);
  }
  const int docs = c.reset_attention_mask || c.reset_position_ids || c.eod_mask_loss;
  if (docs) {
    cJSON_AddBoolToObject(jc, "reset_attention_mask", c.reset_attention_mask);
    cJSON_AddBoolToObject(jc, "reset_position_ids", c.reset_position_ids);
    cJSON_AddBoolToObject(jc, "eod_mask_loss", c.eod_mask_loss);
    cJSON_AddNumberToObject(jc, "eod_token", c.eod_token);
  }
  if (r->num_experts > 0) {
    cJSON_AddNumberToObject(jc, "moe_router_topk", r->moe_router_topk);
    cJSON_AddNumberToObject(jc, "moe_ffn_hidden_size", r->moe_ffn_hidden_size);
    if (r->moe_layer_pattern_len > 0) { /* list form: one 0/1 entry per layer */
      cJSON *jf = cJSON_AddArrayToObject(jc, "moe_layer_freq");
      for (int l = 0; l < r->moe_layer_pattern_len; l++)
        cJSON_AddItemToArray(jf, cJSON_CreateNumber(r->moe_layer_pattern[l]));
    } else {
      cJSON_AddNumberToObject(jc, "moe_layer_freq", r->moe_layer_freq);
    }
    cJSON_AddNumberToObject(jc, "moe_expert_capacity_factor", r->moe_expert_capacity_factor);
    cJSON_AddStringToObject(jc, "moe_token_drop_policy", r->moe_token_drop_policy);
    cJSON_AddBoolToObject(jc, "moe_router_pre_softmax", r->moe_router_pre_softmax);
    cJSON_AddNumberToObject(jc, "moe_aux_loss_coeff", r->moe_aux_loss_coeff);
    cJSON_AddNumberToObject(jc, "moe_z_loss_coeff", r->moe_z_loss_coeff);
    cJSON_AddNumberToObject(jc, "moe_shared_expert_intermediate_size",
                            r->moe_shared_expert_intermediate_size);
    cJSON_AddStringToObject(jc, "moe_router_score_function", r->moe_router_score_function);
    cJSON_AddNumberToObject(jc, "moe_router_topk_scaling_factor",
                            r->moe_router_topk_scaling_factor);
    cJSON_AddStringToObject(jc, "moe_router_load_balancing_type",
                            r->moe_router_load_balancing_type);
    cJSON_AddNumberToObject(jc, "moe_router_num_groups", r->moe_router_num_groups);
    cJSON_AddNumberToObject(jc, "moe_router_group_topk", r->moe_router_group_topk);
    cJSON_AddBoolToObject(jc, "moe_router_enable_expert_bias", r->moe_router_enable_expert_bias);
    if (jbias) cJSON_AddItemToObject(jc, "moe_expert_bias", jbias);
  }
  cJSON *jp = cJSON_AddArrayToObject(meta, "params");

  be->ops->memcpy_d2h(be, host, mt_gpt_param_buffer(m), (size_t)pl->numel * sizeof(float));
  for (int i = 0; i < pl->n; i++) {
    const mt_param *p = &pl->p[i];
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", p->name);
    cJSON *shape = cJSON_AddArrayToObject(o, "shape");
    cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)p->rows));
    cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)p->cols));
    cJSON_AddBoolToObject(o, "no_weight_decay", p->no_weight_decay);
    cJSON_AddItemToArray(jp, o);
    char nm[160];
    snprintf(nm, sizeof nm, "init.%s", p->name);
    write_raw(dir, nm, host + p->offset, (size_t)p->numel * sizeof(float));
  }

  /* batches: deterministic pseudo-random tokens, one per step */
  const int s = c.model.seq_length, b = c.micro_batch_size;
  int32_t *tokens = mt_xmalloc((size_t)(steps + 1) * b * (s + 1) * sizeof(int32_t));
  uint64_t x = 88172645463325252ull;
  for (int64_t i = 0; i < (int64_t)(steps + 1) * b * (s + 1); i++) {
    x ^= x << 13; x ^= x >> 7; x ^= x << 17;
    tokens[i] = (int32_t)(x % (uint64_t)c.model.vocab_size);
    if (docs && (x >> 40) % 5 == 0) tokens[i] = c.eod_token;
  }
  write_raw(dir, "tokens", tokens, (size_t)(steps + 1) * b * (s + 1) * sizeof(int32_t));
  int64_t ids[64];
  for (int j = 0; j < b; j++) ids[j] = j;

  /* one forward/backward on batch 0: loss = mean token loss (over the
   * unmasked tokens with eod_mask_loss) */
  const mt_gpt_config *mc = mt_gpt_get_config(m);
  int64_t nt = mt_gpt_loss_tokens(mc, tokens);
  float scale = 1.0f / (float)nt;
  mt_gpt_zero_grad(m);
  mt_gpt_mtp_stats_reset(m);
  double loss = mt_gpt_forward_backward(m, tokens, ids, 1, scale) / (double)nt;
  cJSON_AddNumberToObject(meta, "loss", loss);
  double msum[MT_MAX_MTP], mcnt[MT_MAX_MTP]; /* per-depth MTP losses of batch 0 */
  const int D = mt_gpt_mtp_losses(m, msum, mcnt);
  if (D > 0) {
    cJSON *jm = cJSON_AddArrayToObject(meta, "mtp_losses");
    for (int k = 0; k < D; k++) cJSON_AddItemToArray(jm, cJSON_CreateNumber(msum[k] / mcnt[k]));
  }
  be->ops->memcpy_d2h(be, host, mt_gpt_grad_buffer(m), (size_t)pl->numel * sizeof(float));
  for (int i = 0; i < pl->n; i++) {
    char nm[160];
    snprintf(nm, sizeof nm, "grad.%s", pl->p[i].name);
    write_raw(dir, nm, host + pl->p[i].offset, (size_t)pl->p[i].numel * sizeof(float));
  }

  /* AdamW curve: step k trains on batch k (k = 0..steps-1), no clipping */
  mt_adamw opt;
  mt_adamw_init(&opt, be, pl, mt_gpt_param_buffer(m), mt_gpt_grad_buffer(m), 0.9f, 0.95f, 1e-8f,
                0.1f);
  mt_lr_schedule sch = {.max_lr = 1e-3f, .min_lr = 1e-4f, .warmup_iters = 2,
                        .decay_iters = steps, .style = MT_LR_COSINE};
  cJSON *curve = cJSON_AddArrayToObject(meta, "adamw_losses");
  cJSON *lrs = cJSON_AddArrayToObject(meta, "adamw_lrs");
  cJSON *jo = cJSON_AddObjectToObject(meta, "adamw");
  cJSON_AddNumberToObject(jo, "beta1", 0.9);
  cJSON_AddNumberToObject(jo, "beta2", 0.95);
  cJSON_AddNumberToObject(jo, "eps", 1e-8);
  cJSON_AddNumberToObject(jo, "weight_decay", 0.1);
  for (int k = 0; k <= steps; k++) {
    mt_gpt_zero_grad(m);
    const int32_t *tk = tokens + (int64_t)k * b * (s + 1);
    nt = mt_gpt_loss_tokens(mc, tk);
    scale = 1.0f / (float)nt;
    double l = mt_gpt_forward_backward(m, tk, ids, k < steps, scale) / (double)nt;
    cJSON_AddItemToArray(curve, cJSON_CreateNumber(l));
    if (k == steps) break;
    float lr = mt_lr_at(&sch, k + 1);
    cJSON_AddItemToArray(lrs, cJSON_CreateNumber(lr));
    mt_adamw_step(&opt, lr, 1.0f);
  }
  char *js = cJSON_Print(meta);
  char path[1024];
  snprintf(path, sizeof path, "%s/meta.json", dir);
  FILE *f = fopen(path, "w");
  fputs(js, f);
  fclose(f);
  cJSON_free(js);
  cJSON_Delete(meta);
  mt_adamw_free(&opt);
  free(tokens);
  free(host);
  mt_gpt_destroy(m);
  mt_backend_destroy(be);
  return 0;
}
