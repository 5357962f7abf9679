/* config/config_keys.c — the table of config keys (docs/config.md is its
 * prose form), message helpers and the canonical JSON writer. */
#include "config/config_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"

const char *const mt_cfg_sections[MT_CFG_NSECTIONS] = {
    "", "model", "parallel", "training", "data", "checkpoint", "logging"};

enum { S_TOP, S_MODEL, S_PAR, S_TRAIN, S_DATA, S_CKPT, S_LOG };

#define FLD(path) offsetof(mt_config, path), sizeof(((mt_config *)0)->path)
#define GE(x) MT_CK_GE, (x), 0
#define GT(x) MT_CK_GT, (x), 0
#define REQ MT_CK_REQUIRED
#define NUL MT_CK_NULLABLE
#define DER MT_CK_DERIVED

/* Order = order of the canonical JSON. */
const mt_cfg_key mt_cfg_keys[] = {
    {S_TOP, "device", MT_CT_STR, FLD(device), 0, 0, 0, "cpu|cuda"},

    {S_MODEL, "num_layers", MT_CT_INT, FLD(model.num_layers), REQ | GE(1), NULL},
    {S_MODEL, "hidden_size", MT_CT_INT, FLD(model.hidden_size), REQ | GE(1), NULL},
    {S_MODEL, "num_attention_heads", MT_CT_INT, FLD(model.num_attention_heads), REQ | GE(1), NULL},
    {S_MODEL, "ffn_hidden_size", MT_CT_INT, FLD(model.ffn_hidden_size), DER | GE(1), NULL},
    {S_MODEL, "seq_length", MT_CT_INT, FLD(model.seq_length), REQ | GE(1), NULL},
    {S_MODEL, "max_position_embeddings", MT_CT_INT, FLD(model.max_position_embeddings), DER | GE(1), NULL},
    {S_MODEL, "vocab_size", MT_CT_INT, FLD(model.vocab_size), GE(1), NULL},
    {S_MODEL, "make_vocab_size_divisible_by", MT_CT_INT, FLD(model.make_vocab_size_divisible_by), GE(1), NULL},
    {S_MODEL, "hidden_dropout", MT_CT_FLOAT, FLD(model.hidden_dropout), MT_CK_GE | MT_CK_LT, 0, 1, NULL},
    {S_MODEL, "attention_dropout", MT_CT_FLOAT, FLD(model.attention_dropout), MT_CK_GE | MT_CK_LT, 0, 1, NULL},
    {S_MODEL, "init_method_std", MT_CT_FLOAT, FLD(model.init_method_std), GT(0), NULL},
    {S_MODEL, "layernorm_epsilon", MT_CT_FLOAT, FLD(model.layernorm_epsilon), GT(0), NULL},
    {S_MODEL, "untie_embeddings_and_output_weights", MT_CT_BOOL, FLD(model.untie_embeddings_and_output_weights), 0, 0, 0, NULL},
    {S_MODEL, "recompute_granularity", MT_CT_STR, FLD(model.recompute_granularity), NUL, 0, 0, "selective|full"},
    {S_MODEL, "recompute_num_layers", MT_CT_INT, FLD(model.recompute_num_layers), GE(1), NULL},
    {S_MODEL, "num_experts", MT_CT_INT, FLD(model.num_experts), NUL | GE(0), NULL},
    {S_MODEL, "moe_router_topk", MT_CT_INT, FLD(model.moe_router_topk), GE(1), NULL},
    {S_MODEL, "moe_ffn_hidden_size", MT_CT_INT, FLD(model.moe_ffn_hidden_size), DER | GE(1), NULL},
    {S_MODEL, "moe_layer_freq", MT_CT_INT, FLD(model.moe_layer_freq), GE(1), NULL},
    {S_MODEL, "moe_aux_loss_coeff", MT_CT_FLOAT, FLD(model.moe_aux_loss_coeff), GE(0), NULL},
    {S_MODEL, "moe_z_loss_coeff", MT_CT_FLOAT, FLD(model.moe_z_loss_coeff), GE(0), NULL},
    {S_MODEL, "moe_expert_capacity_factor", MT_CT_FLOAT, FLD(model.moe_expert_capacity_factor), NUL, 0, 0, NULL},
    {S_MODEL, "moe_token_drop_policy", MT_CT_STR, FLD(model.moe_token_drop_policy), 0, 0, 0, "probs|position"},
    {S_MODEL, "moe_router_pre_softmax", MT_CT_BOOL, FLD(model.moe_router_pre_softmax), 0, 0, 0, NULL},
    {S_MODEL, "moe_pad_expert_input_to_capacity", MT_CT_BOOL, FLD(model.moe_pad_expert_input_to_capacity), 0, 0, 0, NULL},

    {S_PAR, "tensor_model_parallel_size", MT_CT_INT, FLD(parallel.tensor_model_parallel_size), GE(1), NULL},
    {S_PAR, "pipeline_model_parallel_size", MT_CT_INT, FLD(parallel.pipeline_model_parallel_size), GE(1), NULL},
    {S_PAR, "virtual_pipeline_model_parallel_size", MT_CT_INT, FLD(parallel.virtual_pipeline_model_parallel_size), DER | GE(1), NULL},
    {S_PAR, "num_layers_in_first_pipeline_stage", MT_CT_INT, FLD(parallel.num_layers_in_first_pipeline_stage), NUL | GE(0), NULL},
    {S_PAR, "num_layers_in_last_pipeline_stage", MT_CT_INT, FLD(parallel.num_layers_in_last_pipeline_stage), NUL | GE(0), NULL},
    {S_PAR, "sequence_parallel", MT_CT_BOOL, FLD(parallel.sequence_parallel), 0, 0, 0, NULL},
    {S_PAR, "expert_model_parallel_size", MT_CT_INT, FLD(parallel.expert_model_parallel_size), GE(1), NULL},
    {S_PAR, "expert_tensor_parallel_size", MT_CT_INT, FLD(parallel.expert_tensor_parallel_size), DER | GE(1), NULL},
    {S_PAR, "context_parallel_size", MT_CT_INT, FLD(parallel.context_parallel_size), GE(1), NULL},
    {S_PAR, "zero_stage", MT_CT_INT, FLD(parallel.zero_stage), MT_CK_GE | MT_CK_LE, 0, 3, NULL},
    {S_PAR, "ddp_bucket_size", MT_CT_I64, FLD(parallel.ddp_bucket_size), GE(1), NULL},
    {S_PAR, "zero_prefetch_layers", MT_CT_INT, FLD(parallel.zero_prefetch_layers), GE(0), NULL},

    {S_TRAIN, "micro_batch_size", MT_CT_INT, FLD(training.micro_batch_size), GE(1), NULL},
    {S_TRAIN, "global_batch_size", MT_CT_INT, FLD(training.global_batch_size), DER | GE(1), NULL},
    {S_TRAIN, "train_iters", MT_CT_I64, FLD(training.train_iters), REQ | GE(1), NULL},
    {S_TRAIN, "seed", MT_CT_U64, FLD(training.seed), 0, 0, 0, NULL},
    {S_TRAIN, "lr", MT_CT_FLOAT, FLD(training.lr), REQ | GT(0), NULL},
    {S_TRAIN, "min_lr", MT_CT_FLOAT, FLD(training.min_lr), GE(0), NULL},
    {S_TRAIN, "lr_decay_style", MT_CT_STR, FLD(training.lr_decay_style), 0, 0, 0, "constant|linear|cosine"},
    {S_TRAIN, "lr_warmup_iters", MT_CT_I64, FLD(training.lr_warmup_iters), GE(0), NULL},
    {S_TRAIN, "lr_decay_iters", MT_CT_I64, FLD(training.lr_decay_iters), DER | GE(1), NULL},
    {S_TRAIN, "weight_decay", MT_CT_FLOAT, FLD(training.weight_decay), GE(0), NULL},
    {S_TRAIN, "adam_beta1", MT_CT_FLOAT, FLD(training.adam_beta1), MT_CK_GE | MT_CK_LT, 0, 1, NULL},
    {S_TRAIN, "adam_beta2", MT_CT_FLOAT, FLD(training.adam_beta2), MT_CK_GE | MT_CK_LT, 0, 1, NULL},
    {S_TRAIN, "adam_eps", MT_CT_FLOAT, FLD(training.adam_eps), GT(0), NULL},
    {S_TRAIN, "clip_grad", MT_CT_FLOAT, FLD(training.clip_grad), GE(0), NULL},
    {S_TRAIN, "eval_interval", MT_CT_I64, FLD(training.eval_interval), GE(0), NULL},
    {S_TRAIN, "eval_iters", MT_CT_I64, FLD(training.eval_iters), GE(0), NULL},
    {S_TRAIN, "precision", MT_CT_STR, FLD(training.precision), 0, 0, 0, "fp32|bf16"},
    {S_TRAIN, "max_nan_iters", MT_CT_INT, FLD(training.max_nan_iters), GE(1), NULL},
    {S_TRAIN, "exit_interval", MT_CT_I64, FLD(training.exit_interval), GE(0), NULL},
    {S_TRAIN, "check_replicas_interval", MT_CT_I64, FLD(training.check_replicas_interval), GE(0), NULL},
    {S_TRAIN, "num_threads", MT_CT_INT, FLD(training.num_threads), GE(0), NULL},

    {S_DATA, "data_path", MT_CT_PATHS, 0, 0, REQ, 0, 0, NULL},
    {S_DATA, "split", MT_CT_STR, FLD(data.split), 0, 0, 0, NULL},
    {S_DATA, "vocab_file", MT_CT_STR, FLD(data.vocab_file), NUL, 0, 0, NULL},
    {S_DATA, "merge_file", MT_CT_STR, FLD(data.merge_file), NUL, 0, 0, NULL},

    {S_CKPT, "save", MT_CT_STR, FLD(checkpoint.save), NUL, 0, 0, NULL},
    {S_CKPT, "load", MT_CT_STR, FLD(checkpoint.load), NUL, 0, 0, NULL},
    {S_CKPT, "save_interval", MT_CT_I64, FLD(checkpoint.save_interval), GE(0), NULL},

    {S_LOG, "log_interval", MT_CT_I64, FLD(logging.log_interval), GE(1), NULL},
    {S_LOG, "metrics_file", MT_CT_STR, FLD(logging.metrics_file), NUL, 0, 0, NULL},
};
const int mt_cfg_nkeys = (int)(sizeof(mt_cfg_keys) / sizeof(mt_cfg_keys[0]));

_Static_assert(sizeof(mt_cfg_keys) / sizeof(mt_cfg_keys[0]) <= MT_CFG_MAX_KEYS,
               "raise MT_CFG_MAX_KEYS");

int mt_cfg_find_key(int sec, const char *name) {
  for (int k = 0; k < mt_cfg_nkeys; k++)
    if (mt_cfg_keys[k].sec == sec && strcmp(mt_cfg_keys[k].name, name) == 0) return k;
  return -1;
}

int mt_cfg_find_dotted(const char *dotted) {
  const char *dot = strchr(dotted, '.');
  if (!dot) return mt_cfg_find_key(0, dotted);
  for (int s = 1; s < MT_CFG_NSECTIONS; s++) {
    size_t n = strlen(mt_cfg_sections[s]);
    if ((size_t)(dot - dotted) == n && strncmp(dotted, mt_cfg_sections[s], n) == 0)
      return mt_cfg_find_key(s, dot + 1);
  }
  return -1;
}

void *mt_cfg_field(mt_config *cfg, int k) { return (char *)cfg + mt_cfg_keys[k].off; }
const void *mt_cfg_cfield(const mt_config *cfg, int k) {
  return (const char *)cfg + mt_cfg_keys[k].off;
}

static void vfail(mt_cfg_ctx *c, const char *label, const char *suffix, const char *fmt,
                  va_list ap) {
  if (c->failed) return;
  c->failed = 1;
  if (!c->err || c->errlen == 0) return;
  int n = snprintf(c->err, c->errlen, "%s: %s%s: ", c->src, label, suffix);
  if (n >= 0 && (size_t)n < c->errlen) vsnprintf(c->err + n, c->errlen - (size_t)n, fmt, ap);
}

int mt_cfg_fail(mt_cfg_ctx *c, int key, const char *fmt, ...) {
  char label[96];
  const mt_cfg_key *kd = &mt_cfg_keys[key];
  if (kd->sec == 0)
    snprintf(label, sizeof label, "%s", kd->name);
  else
    snprintf(label, sizeof label, "%s.%s", mt_cfg_sections[kd->sec], kd->name);
  va_list ap;
  va_start(ap, fmt);
  vfail(c, label, c->overridden[key] ? " (from --set)" : "", fmt, ap);
  va_end(ap);
  return 2;
}

int mt_cfg_fail_label(mt_cfg_ctx *c, const char *label, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vfail(c, label, "", fmt, ap);
  va_end(ap);
  return 2;
}

/* Shortest decimal form that reads back as the same float, as a double, so
 * the canonical JSON shows 0.1 rather than 0.10000000149011612. */
static double float_as_double(float f) {
  char buf[32];
  for (int prec = 6; prec <= 9; prec++) {
    snprintf(buf, sizeof buf, "%.*g", prec, (double)f);
    if (strtof(buf, NULL) == f) break;
  }
  return strtod(buf, NULL);
}

static cJSON *checked(cJSON *item) {
  MT_ASSERT(item != NULL);
  return item;
}

static cJSON *paths_to_json(const mt_data_config *d) {
  int weighted = 0;
  for (int i = 0; i < d->n_paths; i++)
    if (d->data_weight[i] != 1.0) weighted = 1;
  cJSON *arr = checked(cJSON_CreateArray());
  for (int i = 0; i < d->n_paths; i++) {
    if (weighted) cJSON_AddItemToArray(arr, checked(cJSON_CreateNumber(d->data_weight[i])));
    cJSON_AddItemToArray(arr, checked(cJSON_CreateString(d->data_path[i])));
  }
  return arr;
}

cJSON *mt_cfg_to_json(const mt_config *cfg) {
  cJSON *root = checked(cJSON_CreateObject());
  cJSON *obj = root;
  int cur = 0;
  for (int k = 0; k < mt_cfg_nkeys; k++) { /* the table is grouped by section */
    const mt_cfg_key *kd = &mt_cfg_keys[k];
    const void *p = mt_cfg_cfield(cfg, k);
    if (kd->sec != cur) {
      cur = kd->sec;
      obj = checked(cJSON_AddObjectToObject(root, mt_cfg_sections[cur]));
    }
    cJSON *v = NULL;
    switch (kd->type) {
      case MT_CT_INT: v = cJSON_CreateNumber(*(const int *)p); break;
      case MT_CT_I64: v = cJSON_CreateNumber((double)*(const int64_t *)p); break;
      case MT_CT_U64: v = cJSON_CreateNumber((double)*(const uint64_t *)p); break;
      case MT_CT_FLOAT: v = cJSON_CreateNumber(float_as_double(*(const float *)p)); break;
      case MT_CT_BOOL: v = cJSON_CreateBool(*(const int *)p != 0); break;
      case MT_CT_STR:
        v = ((kd->flags & MT_CK_NULLABLE) && ((const char *)p)[0] == '\0')
                ? cJSON_CreateNull()
                : cJSON_CreateString((const char *)p);
        break;
      case MT_CT_PATHS: v = paths_to_json(&cfg->data); break;
    }
    cJSON_AddItemToObject(obj, kd->name, checked(v));
  }
  return root;
}
