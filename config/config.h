/* config/config.h — the run configuration: one JSON file (cJSON) with
 * sections model, parallel, training, data, checkpoint, logging and the
 * top-level "device". Names are Megatron-LM's arguments in snake_case
 * (DeepSpeed's zero_stage); defaults are Megatron's. Every field below is a
 * key of the same name in its section; its type, range, default, Megatron
 * flag and description are one row of the key table (config/config_table.c),
 * from which docs/config.md is generated (`make docs`). Host-only; the module
 * depends on core/ and cJSON only.
 */
#ifndef MT_CONFIG_CONFIG_H
#define MT_CONFIG_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "config/model_config.h"

#define MT_MAX_DATA_PATHS 16
#define MT_PATH_MAX 1024

typedef struct {
  int tensor_model_parallel_size;
  int pipeline_model_parallel_size;
  int virtual_pipeline_model_parallel_size; /* 1 = no interleaving */
  int overlap_p2p_comm;                     /* pipeline receives posted one action ahead */
  int num_layers_in_first_pipeline_stage;   /* 0 = equal split */
  int num_layers_in_last_pipeline_stage;    /* 0 = equal split */
  int sequence_parallel;
  int expert_model_parallel_size;
  int expert_tensor_parallel_size;
  int context_parallel_size;        /* cp (Megatron's order tp-cp-ep-dp-pp) */
  char cp_comm_type[16];            /* "p2p" (the only one implemented) */
  int zero_stage;                   /* 0..3, DeepSpeed's name */
  int64_t ddp_bucket_size;          /* elements */
  int zero_prefetch_layers;
  int overlap_grad_reduce;          /* bucket reductions launched during the backward */
  int overlap_param_gather;         /* ZeRO-1/2 parameter all-gathers behind the next forward */
  float distributed_timeout_minutes; /* collective / p2p deadline */
  char distributed_backend[8];      /* "nccl" | "mpi" (derived: nccl on cuda) */
} mt_parallel_config;

typedef struct {
  int micro_batch_size;
  int global_batch_size;
  int64_t train_iters;            /* given, or train_samples / global_batch_size */
  int64_t train_samples;          /* 0 = iteration-based training */
  /* Megatron's --rampup-batch-size: start global batch, increment, ramp-up
   * samples (config/batch_rampup.h); start 0 = off (null) */
  int64_t rampup_batch_size[3];
  uint64_t seed;
  float lr;                       /* required */
  float min_lr;
  char lr_decay_style[24];        /* constant | linear | cosine | inverse-square-root | WSD */
  int64_t lr_warmup_iters;
  int64_t lr_decay_iters;
  int64_t lr_warmup_samples, lr_decay_samples; /* sample-based training */
  float lr_warmup_fraction;       /* 0 = unset */
  float lr_warmup_init;
  char lr_wsd_decay_style[16];    /* exponential | linear | cosine | minus_sqrt */
  int64_t lr_wsd_decay_iters, lr_wsd_decay_samples; /* 0 = unset */
  float weight_decay;
  int apply_wd_to_qk_layernorm;   /* q/k norm parameters take weight decay (Megatron's flag) */
  float start_weight_decay, end_weight_decay; /* resolved: = weight_decay when constant */
  char weight_decay_incr_style[16]; /* constant | linear | cosine */
  float adam_beta1, adam_beta2;
  float adam_eps;
  float clip_grad;                /* 0 = off */
  int64_t eval_interval;          /* 0 = never */
  int64_t eval_iters;
  char precision[8];              /* "fp32" | "bf16" */
  /* FP8 (Megatron's --fp8-* flags; docs/fp8.md) */
  char fp8_format[8];             /* "" = off | "e4m3" | "hybrid" */
  char fp8_recipe[12];            /* tensorwise | delayed | blockwise | mxfp8 */
  int fp8_margin;                 /* delayed: scale / 2^margin */
  int fp8_amax_history_len;       /* delayed: amax history entries per tensor */
  char fp8_amax_compute_algo[12]; /* delayed: most_recent | max */
  int fp8_wgrad;                  /* 0: weight-gradient GEMMs in bf16 */
  int first_last_layers_bf16;     /* the first/last layers' linears stay bf16 */
  int num_layers_at_start_in_bf16, num_layers_at_end_in_bf16;
  int fp8_param_gather;           /* ZeRO gathers FP8 weights plus scales */
  int tp_only_amax_red;           /* delayed: amaxes reduced over tp x cp only (not dp) */
  int max_nan_iters;              /* consecutive non-finite steps before abort */
  int64_t exit_interval;          /* save and exit after an iteration divisible by it; 0 = off */
  int exit_signal_handler;        /* save and exit 0 on exit_signal / SIGUSR1 */
  char exit_signal[16];           /* "SIGTERM" | "SIGINT" | "SIGUSR1" | "SIGUSR2" */
  float exit_duration_in_mins;    /* 0 = off */
  int override_opt_param_scheduler, use_checkpoint_opt_param_scheduler;
  int finetune;                   /* load weights only, reset iteration/optimizer/data (Megatron --finetune) */
  int64_t check_replicas_interval; /* compare replica checksums every N iterations; 0 = at the end */
  int num_threads;                /* cpu threads per rank; 0 = OMP default */
} mt_training_config;

/* A list of data prefixes, optionally weighted (Megatron's blend). */
#define MT_DATA_BLEND_FIELDS                                                       \
  int n_paths;                                                                     \
  char data_path[MT_MAX_DATA_PATHS][MT_PATH_MAX]; /* prefixes (.bin/.idx) or llm.c shards */ \
  double data_weight[MT_MAX_DATA_PATHS];          /* blend weights (1.0 each if not given) */ \
  int weighted;                                   /* given in the weighted form */
typedef struct {
  MT_DATA_BLEND_FIELDS
} mt_data_blend;

typedef struct {
  union { /* data_path: cfg->data.data_path[i] or, as a blend, cfg->data.blend */
    struct {
      MT_DATA_BLEND_FIELDS
    };
    mt_data_blend blend;
  };
  /* train_data_path, valid_data_path, test_data_path (Megatron's per-split
   * blends; n_paths 0 = not given), indexed by MT_SPLIT_* order */
  mt_data_blend split_blend[3];
  char data_cache_path[MT_PATH_MAX];              /* "" = no index cache */
  char split[64];                                 /* "969,30,1" */
  char vocab_file[MT_PATH_MAX];                   /* optional, for decoding samples */
  char merge_file[MT_PATH_MAX];
  char tokenizer_type[32];                        /* GPT2BPETokenizer | HuggingFaceTokenizer |
                                                     SentencePieceTokenizer */
  char tokenizer_model[MT_PATH_MAX];              /* tokenizer.json / its folder, tokenizer.model */
  float mid_level_dataset_surplus;                /* blend surplus (0.005) */
  /* documents inside packed sequences (Megatron's GPTDatasetConfig) */
  int reset_position_ids;   /* learned positions restart after each EOD */
  int reset_attention_mask; /* attention stays inside the token's document */
  int eod_mask_loss;        /* no loss on the prediction made at an EOD */
} mt_data_config;

typedef struct {
  char save[MT_PATH_MAX];   /* "" = do not save */
  char load[MT_PATH_MAX];   /* "" = fresh start */
  int64_t save_interval;    /* 0 = only at the end */
  int async_save;           /* write in a background thread */
} mt_checkpoint_config;

typedef struct {
  int64_t log_interval;
  char metrics_file[MT_PATH_MAX]; /* "" = none */
  int log_straggler;              /* slowest / fastest rank per log interval */
  int timing_log_level;           /* Megatron's timers: 0, 1 or 2 */
  char timing_log_option[16];     /* max | minmax | all */
  char tensorboard_dir[MT_PATH_MAX]; /* "" = no TensorBoard event file */
  int64_t tensorboard_log_interval;
  int log_timers_to_tensorboard;
  int log_memory_to_tensorboard;
  char flops_formula[16]; /* megatron | paper (model/gpt_flops.h mt_flops_formula) */
} mt_logging_config;

typedef struct {
  char device[8];                /* "cpu" | "cuda" */
  mt_model_config model;
  mt_parallel_config parallel;
  mt_training_config training;
  mt_data_config data;
  mt_checkpoint_config checkpoint;
  mt_logging_config logging;
  char source_path[MT_PATH_MAX]; /* file it was read from */
  char *json;                    /* canonical JSON of the resolved config (owned) */
  char notes[512];               /* adjustments worth telling the user, one per line
                                    (e.g. sequence_parallel turned off for tp = 1);
                                    "" if none; not part of json */
} mt_config;

/* Read and validate a config: parse `path` (strict JSON, core/json.h), apply
 * `n_overrides` "section.key=value" strings (value parsed as JSON when it
 * parses, else taken as a string; `null` on a key that takes no null and is
 * not required removes the key, so its default applies), check every key (unknown keys with a
 * did-you-mean, types, ranges, keys given without the setting they need,
 * consistency such as hidden_size % num_attention_heads) given `world_size`
 * ranks (< 1 is taken as 1). Returns 0 on success; otherwise writes one
 * message that names the key and the file into err and returns 2 (the exit
 * status). Nothing is allocated on failure and cfg is written only on success
 * (free a previously loaded cfg first). Adjustments the user should hear about
 * are left in cfg->notes. */
int mt_config_load(mt_config *cfg, const char *path, const char *const *overrides,
                   int n_overrides, int world_size, char *err, size_t errlen);

/* Same as mt_config_load but from a JSON string (tests, the user's text). */
int mt_config_load_string(mt_config *cfg, const char *json, const char *source_name,
                          const char *const *overrides, int n_overrides, int world_size,
                          char *err, size_t errlen);

/* Same as mt_config_load_string for a config megatrain wrote (a checkpoint's
 * metadata.json "config", the planner's resolved base): a key of `json` that
 * has no effect under the result (an older build wrote every key; a tool's
 * overrides switched off what enabled it) is dropped, not refused. Keys from
 * `overrides` are checked as always. */
int mt_config_load_saved(mt_config *cfg, const char *json, const char *source_name,
                         const char *const *overrides, int n_overrides, int world_size, char *err,
                         size_t errlen);

/* Dotted names ("section.key") of the keys that apply under `before` but
 * not under `after` (both resolved), at most max into names (each up to 96
 * bytes); returns how many. A --set list that turns `before` into `after`
 * needs "NAME=null" for each when the file gives them. */
int mt_config_keys_switched_off(const mt_config *before, const mt_config *after,
                                char (*names)[96], int max);

/* 0, or 2 with a message naming the keys when this process cannot train
 * the config (MLA on device cuda and MLA with FP8 were refused here until
 * issues 31 / 32, bf16 on the cpu backend until issue 19; nothing is
 * refused today: the hook stays for what a build cannot train). */
int mt_config_check_trainable(const mt_config *cfg, char *err, size_t errlen);

/* Release what mt_config_load allocated. */
void mt_config_free(mt_config *cfg);

/* Derived sizes. */
int mt_config_data_parallel_size(const mt_config *cfg, int world_size);
/* 1 when layer l (0-based, global) is an MoE layer: num_experts > 0 and the
 * moe_layer_freq integer or list selects it. */
int mt_config_is_moe_layer(const mt_config *cfg, int l);
/* Padded vocabulary: vocab_size rounded up to make_vocab_size_divisible_by * tp. */
int64_t mt_config_padded_vocab(const mt_config *cfg);
/* 64-bit FNV hash of the canonical JSON (cross-rank agreement check). */
uint64_t mt_config_hash(const mt_config *cfg);

#endif
