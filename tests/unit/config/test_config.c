/* tests/unit/config/test_config.c — config/: the example config of the
 * issue, Megatron defaults and derived values, --set overrides, the error
 * messages (return 2, key named, did-you-mean), JSON syntax errors with line
 * and caret, canonical JSON round trip and hash. Model-option keys (Llama
 * block, context parallelism, MoE): test_config_model.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "tests/support/probes.h"
#include "config/config.h"
#include "core/util.h"
#include "tests/unit/config_fixtures.h"

static const char *EXAMPLE =
    "{\n"
    "  \"device\": \"cpu\",\n"
    "  \"model\": {\"num_layers\": 4, \"hidden_size\": 256, \"num_attention_heads\": 4, "
    "\"ffn_hidden_size\": 1024,\n"
    "            \"seq_length\": 128, \"max_position_embeddings\": 128, \"vocab_size\": 50257, "
    "\"make_vocab_size_divisible_by\": 128,\n"
    "            \"hidden_dropout\": 0.1, \"attention_dropout\": 0.1, \"init_method_std\": 0.02, "
    "\"untie_embeddings_and_output_weights\": false},\n"
    "  \"parallel\": {\"tensor_model_parallel_size\": 1, \"pipeline_model_parallel_size\": 1, "
    "\"sequence_parallel\": false, \"zero_stage\": 0},\n"
    "  \"training\": {\"micro_batch_size\": 8, \"global_batch_size\": 16, \"train_iters\": 200, "
    "\"seed\": 1234,\n"
    "               \"lr\": 1e-3, \"min_lr\": 1e-4, \"lr_decay_style\": \"cosine\", "
    "\"lr_warmup_iters\": 20, \"lr_decay_iters\": 200,\n"
    "               \"weight_decay\": 0.1, \"adam_beta1\": 0.9, \"adam_beta2\": 0.95, "
    "\"adam_eps\": 1e-8, \"clip_grad\": 1.0,\n"
    "               \"eval_interval\": 50, \"eval_iters\": 10},\n"
    "  \"data\": {\"data_path\": [\"data/corpus_text_document\"], \"split\": \"969,30,1\"},\n"
    "  \"checkpoint\": {\"save\": \"checkpoints/gpt-tiny\", \"load\": null, \"save_interval\": 100},\n"
    "  \"logging\": {\"log_interval\": 10, \"metrics_file\": \"checkpoints/gpt-tiny/metrics.jsonl\"}\n"
    "}\n";


static char *write_tmp(const char *text) {
  char *path = malloc(64);
  snprintf(path, 64, "/tmp/mt_test_config_XXXXXX");
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  size_t n = strlen(text);
  assert_int_equal(write(fd, text, n), (ssize_t)n);
  close(fd);
  return path;
}

static void test_example_file(void **state) {
  (void)state;
  char *path = write_tmp(EXAMPLE);
  mt_config cfg;
  char err[1024] = "";
  int rc = mt_config_load(&cfg, path, NULL, 0, 1, err, sizeof err);
  if (rc) print_message("%s\n", err);
  assert_int_equal(rc, 0);
  assert_string_equal(cfg.device, "cpu");
  assert_int_equal(cfg.model.num_layers, 4);
  assert_int_equal(cfg.model.hidden_size, 256);
  assert_int_equal(cfg.model.ffn_hidden_size, 1024);
  assert_int_equal(cfg.model.max_position_embeddings, 128);
  assert_true(cfg.model.hidden_dropout == 0.1f);
  assert_true(cfg.model.init_method_std == 0.02f);
  assert_true(cfg.model.layernorm_epsilon == 1e-5f);
  assert_int_equal(cfg.model.untie_embeddings_and_output_weights, 0);
  assert_string_equal(cfg.model.recompute_granularity, "");
  assert_int_equal(cfg.model.moe_ffn_hidden_size, 1024);
  assert_int_equal(cfg.parallel.expert_tensor_parallel_size, 1);
  assert_int_equal(cfg.parallel.virtual_pipeline_model_parallel_size, 1);
  assert_int_equal(cfg.parallel.ddp_bucket_size, 40000000);
  assert_int_equal(cfg.training.micro_batch_size, 8);
  assert_int_equal(cfg.training.global_batch_size, 16);
  assert_int_equal(cfg.training.train_iters, 200);
  assert_int_equal(cfg.training.seed, 1234);
  assert_true(cfg.training.lr == 1e-3f);
  assert_true(cfg.training.min_lr == 1e-4f);
  assert_string_equal(cfg.training.lr_decay_style, "cosine");
  assert_true(cfg.training.adam_beta2 == 0.95f);
  assert_true(cfg.training.adam_eps == 1e-8f);
  assert_string_equal(cfg.training.precision, "fp32");
  assert_int_equal(cfg.training.max_nan_iters, 10);
  assert_int_equal(cfg.data.n_paths, 1);
  assert_string_equal(cfg.data.data_path[0], "data/corpus_text_document");
  assert_true(cfg.data.data_weight[0] == 1.0);
  assert_string_equal(cfg.data.split, "969,30,1");
  assert_string_equal(cfg.checkpoint.save, "checkpoints/gpt-tiny");
  assert_string_equal(cfg.checkpoint.load, "");
  assert_int_equal(cfg.checkpoint.save_interval, 100);
  assert_int_equal(cfg.logging.log_interval, 10);
  assert_string_equal(cfg.logging.metrics_file, "checkpoints/gpt-tiny/metrics.jsonl");
  assert_string_equal(cfg.source_path, path);
  assert_string_equal(cfg.notes, "");
  assert_int_equal(mt_config_padded_vocab(&cfg), 50304);
  assert_int_equal(mt_config_data_parallel_size(&cfg, 1), 1);
  assert_non_null(cfg.json);
  assert_non_null(strstr(cfg.json, "\"hidden_size\":256"));
  assert_non_null(strstr(cfg.json, "\"hidden_dropout\":0.1,"));
  assert_non_null(strstr(cfg.json, "\"load\":null"));
  const char *head = "{\"device\":\"cpu\",\"model\":{\"num_layers\":4,";
  assert_true(strncmp(cfg.json, head, strlen(head)) == 0);

  /* The canonical JSON loads back to the same config and hash. */
  mt_config again;
  rc = mt_config_load_string(&again, cfg.json, "checkpoint", NULL, 0, 1, err, sizeof err);
  if (rc) print_message("%s\n", err);
  assert_int_equal(rc, 0);
  assert_string_equal(again.json, cfg.json);
  assert_true(mt_config_hash(&again) == mt_config_hash(&cfg));
  const char *ov[] = {"training.seed=1235"};
  mt_config other;
  assert_int_equal(mt_config_load(&other, path, ov, 1, 1, err, sizeof err), 0);
  assert_true(mt_config_hash(&other) != mt_config_hash(&cfg));
  mt_config_free(&other);
  mt_config_free(&again);
  mt_config_free(&cfg);
  assert_null(cfg.json);
  unlink(path);
  free(path);
}

static void test_defaults(void **state) {
  (void)state;
  mt_config d;
  mt_config_defaults(&d);
  assert_string_equal(d.device, "cpu");
  assert_int_equal(d.training.micro_batch_size, 1);
  assert_int_equal(d.training.seed, 1234);
  assert_true(d.training.weight_decay == 0.01f);
  assert_true(d.training.adam_beta2 == 0.999f);
  assert_string_equal(d.training.lr_decay_style, "linear");
  assert_string_equal(d.model.moe_token_drop_policy, "probs");
  assert_null(d.json);

  mt_config cfg;
  char err[1024] = "";
  int rc = mt_config_load_string(&cfg, MINIMAL, SRC, NULL, 0, 4, err, sizeof err);
  if (rc) print_message("%s\n", err);
  assert_int_equal(rc, 0);
  assert_int_equal(cfg.model.ffn_hidden_size, 256);          /* 4 * hidden */
  assert_int_equal(cfg.model.max_position_embeddings, 32);   /* seq_length */
  assert_int_equal(cfg.model.moe_ffn_hidden_size, 256);      /* ffn_hidden_size */
  assert_int_equal(cfg.training.global_batch_size, 8);       /* mbs 2 x dp 4 */
  assert_int_equal(cfg.training.lr_decay_iters, 10);         /* train_iters */
  assert_int_equal(cfg.model.vocab_size, 50257);
  assert_int_equal(cfg.model.make_vocab_size_divisible_by, 128);
  assert_true(cfg.model.attention_dropout == 0.1f);
  assert_int_equal(cfg.model.moe_router_topk, 2);
  assert_int_equal(cfg.model.moe_layer_freq, 1);
  assert_int_equal(cfg.model.num_experts, 0);
  assert_int_equal(cfg.parallel.zero_prefetch_layers, 1);
  assert_string_equal(cfg.parallel.distributed_backend, "mpi"); /* derived: device cpu */
  assert_non_null(strstr(cfg.json, "\"distributed_backend\":\"mpi\""));
  assert_int_equal(cfg.training.eval_interval, 1000);
  assert_int_equal(cfg.training.eval_iters, 100);
  assert_true(cfg.training.clip_grad == 1.0f);
  assert_true(cfg.training.min_lr == 0.0f);
  assert_int_equal(cfg.training.lr_warmup_iters, 0);
  assert_int_equal(cfg.logging.log_interval, 100);
  assert_int_equal(cfg.checkpoint.save_interval, 0);
  assert_string_equal(cfg.data.split, "969,30,1");
  assert_string_equal(cfg.data.data_path[0], "prefix");
  assert_string_equal(cfg.checkpoint.save, "");
  assert_string_equal(cfg.logging.metrics_file, "");
  assert_int_equal(mt_config_data_parallel_size(&cfg, 4), 4);
  mt_config_free(&cfg);

  /* tp = 2 on 4 ranks: dp 2, expert tp = tp, padded vocab multiple of 256. */
  const char *ov[] = {"parallel.tensor_model_parallel_size=2", "model.ffn_hidden_size=0"};
  assert_int_equal(mt_config_load_string(&cfg, MINIMAL, SRC, ov, 2, 4, err, sizeof err), 0);
  assert_int_equal(cfg.parallel.expert_tensor_parallel_size, 2);
  assert_int_equal(cfg.training.global_batch_size, 4);
  assert_int_equal(cfg.model.ffn_hidden_size, 256);
  assert_int_equal(mt_config_data_parallel_size(&cfg, 4), 2);
  assert_int_equal(mt_config_padded_vocab(&cfg), 50432);
  mt_config_free(&cfg);

  /* parallel.distributed_backend: "nccl" on cuda unless set; "mpi" kept */
  const char *cu[] = {"device=cuda"}, *cu_mpi[] = {"device=cuda", "parallel.distributed_backend=mpi"};
  assert_int_equal(mt_config_load_string(&cfg, MINIMAL, SRC, cu, 1, 4, err, sizeof err), 0);
  assert_string_equal(cfg.parallel.distributed_backend, "nccl");
  mt_config_free(&cfg);
  assert_int_equal(mt_config_load_string(&cfg, MINIMAL, SRC, cu_mpi, 2, 4, err, sizeof err), 0);
  assert_string_equal(cfg.parallel.distributed_backend, "mpi");
  mt_config_free(&cfg);
}

static void test_overrides(void **state) {
  (void)state;
  const char *ov[] = {
      "model.hidden_size=128",             /* number */
      "training.lr=3e-4",                  /* number with exponent */
      "model.untie_embeddings_and_output_weights=true", /* bool */
      "checkpoint.load=null",              /* null */
      "data.data_path=[\"a\", \"b\"]",     /* list */
      "training.lr_decay_style=cosine",    /* not JSON: taken as a string */
      "checkpoint.save=out/run 1",         /* string with a space */
      "logging.log_interval=5",            /* section absent from the file */
      "device=cuda",                       /* top-level key */
      "parallel.sequence_parallel=true",   /* tp = 1: allowed, noted, off */
      "model.recompute_granularity=\"full\"", /* quoted JSON string */
      "data.vocab_file=2024",              /* string key: number text kept */
  };
  mt_config cfg;
  char err[1024] = "";
  int rc = mt_config_load_string(&cfg, MINIMAL, SRC, ov, (int)(sizeof ov / sizeof ov[0]), 1, err,
                                 sizeof err);
  if (rc) print_message("%s\n", err);
  assert_int_equal(rc, 0);
  assert_int_equal(cfg.model.hidden_size, 128);
  assert_int_equal(cfg.model.ffn_hidden_size, 512);
  assert_true(cfg.training.lr == 3e-4f);
  assert_int_equal(cfg.model.untie_embeddings_and_output_weights, 1);
  assert_string_equal(cfg.checkpoint.load, "");
  assert_int_equal(cfg.data.n_paths, 2);
  assert_string_equal(cfg.data.data_path[1], "b");
  assert_string_equal(cfg.training.lr_decay_style, "cosine");
  assert_string_equal(cfg.checkpoint.save, "out/run 1");
  assert_int_equal(cfg.logging.log_interval, 5);
  assert_string_equal(cfg.device, "cuda");
  assert_int_equal(cfg.parallel.sequence_parallel, 0);
  assert_non_null(strstr(cfg.notes, "sequence_parallel"));
  assert_string_equal(cfg.model.recompute_granularity, "full");
  assert_string_equal(cfg.data.vocab_file, "2024");
  mt_config_free(&cfg);

  /* Weighted data paths: numbers or numeric strings before each prefix. */
  const char *w1[] = {"data.data_path=[0.7, \"a\", 0.3, \"b\"]"};
  const char *w2[] = {"data.data_path=[\"0.7\", \"a\", \"0.3\", \"b\"]"};
  mt_config c1, c2;
  assert_int_equal(mt_config_load_string(&c1, MINIMAL, SRC, w1, 1, 1, err, sizeof err), 0);
  assert_int_equal(mt_config_load_string(&c2, MINIMAL, SRC, w2, 1, 1, err, sizeof err), 0);
  assert_int_equal(c1.data.n_paths, 2);
  assert_true(c1.data.data_weight[0] == 0.7 && c1.data.data_weight[1] == 0.3);
  assert_string_equal(c1.data.data_path[0], "a");
  assert_string_equal(c1.json, c2.json);
  assert_non_null(strstr(c1.json, "\"data_path\":[0.7,\"a\",0.3,\"b\"]"));
  mt_config_free(&c1);
  mt_config_free(&c2);
}

typedef struct {
  const char *json;       /* NULL = MINIMAL */
  const char *ov[4];      /* overrides */
  int world;
  const char *want[3];    /* substrings the message must contain */
} err_case;

static const err_case CASES[] = {
    /* unknown keys / sections with did-you-mean */
    {"{\"model\": {\"hiden_size\": 64}}", {0}, 1,
     {"configs/x.json: model.hiden_size: unknown key", "did you mean 'hidden_size'?"}},
    {"{\"modle\": {}}", {0}, 1, {"modle", "unknown section", "did you mean 'model'?"}},
    {"{\"model\": {\"lr\": 1}}", {0}, 1, {"model.lr", "did you mean 'training.lr'?"}},
    {NULL, {"model.hiden_size=3"}, 1, {"model.hiden_size (from --set)", "did you mean 'hidden_size'?"}},
    {NULL, {"training.lr_warmup=3"}, 1, {"training.lr_warmup", "did you mean 'lr_warmup_init'?"}},
    {NULL, {"trainig.lr=3"}, 1, {"trainig", "did you mean 'training'?"}},
    {NULL, {"no_equals_sign"}, 1, {"--set", "section.key=value"}},
    {NULL, {"model=3"}, 1, {"--set", "section"}},
    /* types */
    {NULL, {"model.hidden_size=\"256\""}, 1, {"model.hidden_size", "expected an integer", "string"}},
    {NULL, {"model.hidden_size=abc"}, 1, {"model.hidden_size", "expected an integer"}},
    {NULL, {"model.num_layers=2.5"}, 1, {"model.num_layers", "expected an integer", "2.5"}},
    {NULL, {"model.untie_embeddings_and_output_weights=1"}, 1,
     {"model.untie_embeddings_and_output_weights", "expected true or false"}},
    {"{\"checkpoint\": {\"save\": 3}}", {0}, 1, {"checkpoint.save", "expected a string or null"}},
    {NULL, {"checkpoint.save=[1]"}, 1, {"checkpoint.save (from --set)", "expected a string"}},
    {NULL, {"training.lr=null"}, 1, {"training.lr", "expected a number", "null"}},
    {NULL, {"training.seed=-1"}, 1, {"training.seed", "non-negative integer"}},
    {NULL, {"training.train_iters=1e20"}, 1, {"training.train_iters", "expected an integer"}},
    {"{\"model\": 3}", {0}, 1, {"configs/x.json: model:", "expected an object"}},
    {"[1, 2]", {0}, 1, {"top level", "JSON object"}},
    {"{\"model\": {\"num_layers\": 2, \"num_layers\": 3}}", {0}, 1, {"model.num_layers", "twice"}},
    /* ranges */
    {NULL, {"model.hidden_size=-4"}, 1, {"model.hidden_size", "out of range", ">= 1"}},
    {NULL, {"model.hidden_dropout=1"}, 1, {"model.hidden_dropout", "[0, 1)"}},
    {NULL, {"model.attention_dropout=-0.1"}, 1, {"model.attention_dropout", "[0, 1)"}},
    {NULL, {"training.lr=0"}, 1, {"training.lr", "> 0"}},
    {NULL, {"training.lr=-1"}, 1, {"training.lr", "out of range"}},
    {NULL, {"parallel.zero_stage=4"}, 1, {"parallel.zero_stage", "[0, 3]"}},
    /* refused by the trainer, hence by the config checks plan and topology share */
    {NULL, {"parallel.zero_stage=2", "parallel.pipeline_model_parallel_size=2"}, 2,
     {"parallel.zero_stage", "with pipeline parallelism is not implemented"}},
    {NULL, {"training.override_opt_param_scheduler=true",
            "training.use_checkpoint_opt_param_scheduler=true"}, 1,
     {"training.override_opt_param_scheduler", "use_checkpoint_opt_param_scheduler"}},
    {NULL, {"training.adam_beta1=1"}, 1, {"training.adam_beta1", "[0, 1)"}},
    {NULL, {"training.adam_beta2=-0.5"}, 1, {"training.adam_beta2"}},
    {NULL, {"training.micro_batch_size=0"}, 1, {"training.micro_batch_size", ">= 1"}},
    {NULL, {"logging.log_interval=0"}, 1, {"logging.log_interval"}},
    {NULL, {"model.ffn_hidden_size=-8"}, 1, {"model.ffn_hidden_size", "derived"}},
    {NULL, {"training.lr_decay_style=cosin"}, 1, {"training.lr_decay_style", "constant|linear|cosine"}},
    {NULL, {"device=tpu"}, 1, {"configs/x.json: device", "cpu|cuda"}},
    {NULL, {"training.precision=fp16"}, 1, {"training.precision", "fp32|bf16"}},
    {NULL, {"model.recompute_granularity=some"}, 1, {"model.recompute_granularity", "selective|full"}},
    {NULL, {"data.split=abc"}, 1, {"data.split", "969,30,1"}},
    {NULL, {"data.split=1,2,3,4"}, 1, {"data.split"}},
    {NULL, {"data.data_path=[]"}, 1, {"data.data_path", "empty"}},
    {NULL, {"data.data_path=[0.5, \"a\", 0.5]"}, 1, {"data.data_path", "pairs"}},
    {NULL, {"data.data_path=[-1, \"a\"]"}, 1, {"data.data_path", "weight"}},
    {NULL, {"data.data_path=[\"a\", 3]"}, 1, {"data.data_path", "element 1"}},
    /* per-split paths (issue 30): exclusive with data_path and split; valid/test need train
     * (the key table's needs column) */
    {NULL, {"data.train_data_path=[\"t\"]"}, 1, {"data.train_data_path", "data.data_path"}},
    {NULL, {"data.data_path=null", "data.valid_data_path=[\"v\"]"}, 1,
     {"data.valid_data_path", "no effect with train_data_path null", "expected data.train_data_path"}},
    {NULL, {"data.data_path=null", "data.train_data_path=[\"t\"]", "data.split=90,10,0"}, 1,
     {"data.split", "no effect"}},
    {NULL, {"data.data_path=null"}, 1, {"data.data_path", "missing"}},
    /* the optimizer schedule (issue 30): Megatron's rules */
    {NULL, {"training.train_samples=100"}, 1, {"training.train_samples", "train_iters"}},
    {NULL, {"training.lr_wsd_decay_iters=3"}, 1, {"training.lr_wsd_decay_iters", "\"WSD\""}},
    {NULL, {"training.lr_decay_style=WSD"}, 1, {"training.lr_wsd_decay_iters", "missing"}},
    {NULL, {"training.lr_warmup_fraction=0.1", "training.lr_warmup_iters=2"}, 1,
     {"training.lr_warmup_fraction", "lr_warmup_iters"}},
    {NULL, {"training.lr_decay_samples=50"}, 1, {"training.lr_decay_samples", "no effect"}},
    {NULL, {"training.start_weight_decay=0.1"}, 1, {"training.start_weight_decay", "\"constant\""}},
    {NULL, {"training.weight_decay_incr_style=linear"}, 1, {"training.end_weight_decay", "missing"}},
    {NULL, {"training.lr_warmup_init=1e-5"}, 1, {"training.lr_warmup_init", "without a warmup"}},
    /* context parallelism: 2·cp | seq_length (2·cp·tp with SP), world, p2p only */
    {NULL, {"parallel.context_parallel_size=3"}, 3, {"model.seq_length", "2 x context_parallel_size = 6"}},
    {NULL, {"parallel.context_parallel_size=2"}, 3,
     {"parallel.context_parallel_size", "does not divide the world size 3"}},
    {NULL, {"parallel.context_parallel_size=2", "parallel.tensor_model_parallel_size=4",
            "parallel.sequence_parallel=true", "model.seq_length=24"}, 8,
     {"model.seq_length", "tensor_model_parallel_size = 16"}},
    {NULL, {"parallel.cp_comm_type=\"a2a\""}, 1, {"parallel.cp_comm_type", "not implemented"}},
    {NULL, {"parallel.cp_comm_type=\"ring\""}, 1, {"parallel.cp_comm_type", "p2p|a2a"}},
    /* required */
    {"{\"model\": {\"num_layers\": 2, \"hidden_size\": 64, \"num_attention_heads\": 4, "
     "\"seq_length\": 32}, \"training\": {\"train_iters\": 10}, \"data\": {\"data_path\": \"p\"}}",
     {0}, 1, {"training.lr", "required"}},
    {"{\"model\": {\"num_layers\": 2, \"hidden_size\": 64, \"num_attention_heads\": 4, "
     "\"seq_length\": 32}, \"training\": {\"train_iters\": 10, \"lr\": 1}}",
     {0}, 1, {"data.data_path", "required"}},
    /* consistency */
    {NULL, {"model.num_attention_heads=5"}, 1, {"model.num_attention_heads", "hidden_size (64)"}},
    {NULL, {"parallel.tensor_model_parallel_size=3"}, 4, {"parallel.tensor_model_parallel_size", "world size 4"}},
    {NULL, {"parallel.pipeline_model_parallel_size=4"}, 4, {"model.num_layers", "pipeline"}},
    {NULL, {"parallel.tensor_model_parallel_size=8"}, 8, {"model.num_attention_heads", "tensor"}},
    {NULL, {"training.global_batch_size=12"}, 4, {"training.global_batch_size", "micro_batch_size (2)"}},
    {NULL, {"model.max_position_embeddings=16"}, 1, {"model.seq_length", "max_position_embeddings"}},
    {NULL, {"training.min_lr=1"}, 1, {"training.min_lr", "lr"}},
    {NULL, {"training.lr_warmup_iters=20"}, 1, {"training.lr_warmup_iters", "lr_decay_iters"}},
    {NULL, {"parallel.virtual_pipeline_model_parallel_size=2"}, 1,
     {"parallel.virtual_pipeline_model_parallel_size", "pipeline_model_parallel_size > 1"}},
    {NULL, {"parallel.sequence_parallel=true", "parallel.tensor_model_parallel_size=2", "model.seq_length=31"}, 2,
     {"parallel.sequence_parallel", "seq_length (31)"}},
    {NULL, {"parallel.expert_model_parallel_size=2"}, 2, {"parallel.expert_model_parallel_size", "num_experts"}},
    {NULL, {"model.num_experts=6", "parallel.expert_model_parallel_size=4"}, 4,
     {"parallel.expert_model_parallel_size", "num_experts 6"}},
    {NULL, {"model.num_experts=8", "parallel.expert_model_parallel_size=8"}, 4,
     {"parallel.expert_model_parallel_size", "world size 4"}},
    {NULL, {"model.num_experts=2", "parallel.expert_tensor_parallel_size=2"}, 2,
     {"model.add_bias_linear", "expert_tensor_parallel_size 2"}},
    {NULL, {"model.num_experts=4", "model.add_bias_linear=false",
            "parallel.expert_tensor_parallel_size=2", "parallel.expert_model_parallel_size=2"}, 2,
     {"parallel.expert_model_parallel_size", "expert_tensor_parallel_size (2) x", "world size 2"}},
    {NULL, {"model.num_experts=4", "model.add_bias_linear=false", "model.moe_ffn_hidden_size=30",
            "parallel.expert_tensor_parallel_size=4"}, 4,
     {"model.moe_ffn_hidden_size", "expert_tensor_parallel_size 4"}},
    {NULL, {"model.num_experts=2", "model.moe_router_topk=3"}, 1, {"model.moe_router_topk", "num_experts 2"}},
    {NULL, {"model.num_experts=2", "model.moe_pad_expert_input_to_capacity=true"}, 1,
     {"model.moe_pad_expert_input_to_capacity", "capacity_factor"}},
    {NULL, {"model.recompute_granularity=full", "model.recompute_num_layers=3"}, 1,
     {"model.recompute_num_layers"}},
    {NULL, {"parallel.distributed_backend=nccl"}, 1,
     {"parallel.distributed_backend", "\"nccl\" with device \"cpu\"", "expected \"mpi\""}},
    {NULL, {"parallel.distributed_backend=gloo"}, 1,
     {"parallel.distributed_backend", "nccl|mpi"}},
    /* Llama-style block options (docs/model.md) */
    {NULL, {"model.position_embedding_type=yarn"}, 1,
     {"model.position_embedding_type", "learned_absolute|rope|none"}},
    {NULL, {"model.normalization=rmsnorm"}, 1, {"model.normalization", "LayerNorm|RMSNorm"}},
    {NULL, {"model.norm_epsilon=1e-6", "model.layernorm_epsilon=1e-5"}, 1,
     {"model.layernorm_epsilon", "norm_epsilon 1e-06"}},
    {NULL, {"model.norm_epsilon=0"}, 1, {"model.norm_epsilon", "> 0"}},
    {NULL, {"model.num_query_groups=2"}, 1, {"model.num_query_groups", "group_query_attention"}},
    {NULL, {"model.group_query_attention=true", "model.num_query_groups=3"}, 1,
     {"model.num_query_groups", "does not divide num_attention_heads 4"}},
    {NULL, {"model.group_query_attention=true", "model.num_query_groups=8"}, 1,
     {"model.num_query_groups", "does not divide"}},
    {NULL, {"model.group_query_attention=true", "model.num_query_groups=2",
            "parallel.tensor_model_parallel_size=4"}, 4,
     {"model.num_query_groups", "tensor_model_parallel_size 4"}},
    {NULL, {"model.group_query_attention=true", "parallel.tensor_model_parallel_size=2"}, 2,
     {"model.num_query_groups", "1 K/V group(s) (the default: MQA)"}}, /* default 1 = MQA, not splittable */
    {NULL, {"model.kv_channels=-1"}, 1, {"model.kv_channels", ">= 1"}},
    {NULL, {"model.position_embedding_type=rope", "model.rotary_percent=0"}, 1,
     {"model.rotary_percent", "(0, 1]"}},
    {NULL, {"model.position_embedding_type=rope", "model.rotary_percent=1.5"}, 1,
     {"model.rotary_percent", "(0, 1]"}},
    {NULL, {"model.position_embedding_type=rope", "model.rotary_percent=0.2"}, 1,
     {"model.rotary_percent", "gives 3 rotated channels"}}, /* int(16 x 0.2) = 3: odd */
    {NULL, {"model.position_embedding_type=rope", "model.rotary_percent=0.05"}, 1,
     {"model.rotary_percent", "gives 0 rotated channels"}},
    {NULL, {"model.position_embedding_type=rope", "model.kv_channels=15"}, 1,
     {"model.kv_channels", "15 rotated channels"}},
    {NULL, {"model.position_embedding_type=rope", "model.rotary_base=0"}, 1,
     {"model.rotary_base", "> 0"}},
    {NULL, {"model.rotary_percent=0.5"}, 1,
     {"model.rotary_percent", "no effect with position_embedding_type \"learned_absolute\""}},
    {NULL, {"model.position_embedding_type=none", "model.rotary_base=500000"}, 1,
     {"model.rotary_base", "\"none\"", "rope"}},
    {NULL, {"model.rotary_interleaved=true"}, 1, {"model.rotary_interleaved", "true has no effect"}},
    {NULL, {"model.qk_layernorm=true", "model.kv_channels=1"}, 1,
     {"model.qk_layernorm", "kv_channels >= 2"}},
    {NULL, {"model.swiglu=true", "model.hidden_size=16"}, 1,
     {"model.ffn_hidden_size", "swiglu", "hidden_size 16"}},
    {NULL, {"model.swiglu=true", "model.ffn_hidden_size=33", "parallel.tensor_model_parallel_size=2"}, 2,
     {"model.ffn_hidden_size", "tensor_model_parallel_size 2"}},
    {NULL, {"model.num_attention_heads=3"}, 1,
     {"model.num_attention_heads", "kv_channels set explicitly"}},
};

/* The Llama-style block keys: Megatron's derived values, the epsilon
 * alias, and a canonical JSON that loads back unchanged. */
/* context_parallel_size: dp = world / (tp·cp·pp); the global batch counts
 * samples, so its derived default is micro_batch_size x dp (not x cp);
 * seq_length 24 with tp 2 + SP and cp 3 is refused (24 % 12 == 0 passes,
 * 2·cp·tp = 12), with cp 2 and tp 4 it is not a multiple of 16. */


static void test_errors(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
    const err_case *tc = &CASES[i];
    int n = 0;
    while (n < 4 && tc->ov[n]) n++;
    mt_config cfg;
    memset(&cfg, 0x5a, sizeof cfg);
    cfg.json = (char *)"untouched";
    char err[1024] = "";
    int rc = mt_config_load_string(&cfg, tc->json ? tc->json : MINIMAL, SRC, tc->ov, n,
                                   tc->world, err, sizeof err);
    print_message("case %zu: %s\n", i, err);
    assert_int_equal(rc, 2);
    assert_string_equal(cfg.json, "untouched"); /* nothing written or allocated */
    assert_non_null(strstr(err, SRC));
    for (int w = 0; w < 3 && tc->want[w]; w++) {
      if (!strstr(err, tc->want[w])) print_message("case %zu: missing \"%s\"\n", i, tc->want[w]);
      assert_non_null(strstr(err, tc->want[w]));
    }
  }
}

static void test_syntax_error(void **state) {
  (void)state;
  const char *bad =
      "{\n"
      "  \"model\": {\n"
      "    \"hidden_size\": 256,,\n"
      "    \"num_layers\": 2\n"
      "  }\n"
      "}\n";
  char *path = write_tmp(bad);
  mt_config cfg;
  char err[1024] = "";
  assert_int_equal(mt_config_load(&cfg, path, NULL, 0, 1, err, sizeof err), 2);
  print_message("%s\n", err);
  assert_non_null(strstr(err, path));
  assert_non_null(strstr(err, "line 3"));
  assert_non_null(strstr(err, "\"hidden_size\": 256,,"));
  assert_non_null(strstr(err, "^"));
  /* The caret sits at the second comma or just after it (cJSON reports the
   * position after the character it could not use). */
  const char *snip = strstr(err, "\"hidden_size\"");
  const char *caret = strchr(snip, '^');
  const char *caret_line = strrchr(err, '\n') + 1;
  const char *snip_line = snip;
  while (snip_line[-1] != '\n') snip_line--;
  long comma2 = (long)(strstr(snip, ",,") + 1 - snip_line);
  assert_in_range(caret - caret_line, comma2, comma2 + 1);
  unlink(path);
  free(path);

  /* Truncated input and an empty file. */
  assert_int_equal(mt_config_load_string(&cfg, "{\"model\": {", SRC, NULL, 0, 1, err, sizeof err), 2);
  assert_non_null(strstr(err, "line 1"));
  assert_int_equal(mt_config_load_string(&cfg, "", SRC, NULL, 0, 1, err, sizeof err), 2);
  assert_non_null(strstr(err, "JSON syntax error"));

  /* Unprintable bytes are quoted escaped, in a short window. */
  assert_int_equal(mt_config_load_string(&cfg, "{\"model\": \x01\xff\x1b[31m zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz", SRC, NULL, 0, 1, err, sizeof err), 2);
  assert_non_null(strstr(err, "\\x01\\xFF\\x1B[31m"));
  for (const char *q = err; *q; q++) assert_true(*q == '\n' || (*q >= 0x20 && *q < 0x7f));
  assert_true(strlen(strchr(err, '\n') + 1) < 250);

  /* A missing file is named. */
  assert_int_equal(mt_config_load(&cfg, "/nonexistent/cfg.json", NULL, 0, 1, err, sizeof err), 2);
  assert_non_null(strstr(err, "/nonexistent/cfg.json"));
  /* A tiny error buffer is fine. */
  char tiny[8];
  assert_int_equal(mt_config_load_string(&cfg, "{", SRC, NULL, 0, 1, tiny, sizeof tiny), 2);
  assert_int_equal(strlen(tiny), 7);
  assert_int_equal(mt_config_load_string(&cfg, "{", SRC, NULL, 0, 1, NULL, 0), 2);
}

/* Every key of the canonical JSON is documented in docs/config.md (the test
 * runs from the repository root; skipped elsewhere). */
static void test_docs_list_every_key(void **state) {
  (void)state;
  FILE *f = fopen("docs/config.md", "rb");
  if (!f) {
    print_message("docs/config.md not found from here; skipping\n");
    skip();
  }
  static char doc[1 << 17];
  size_t n = fread(doc, 1, sizeof doc - 1, f);
  fclose(f);
  doc[n] = '\0';
  mt_config cfg;
  char err[1024] = "";
  assert_int_equal(mt_config_load_string(&cfg, MINIMAL, SRC, NULL, 0, 1, err, sizeof err), 0);
  cJSON *root = cJSON_Parse(cfg.json);
  assert_non_null(root);
  int nkeys = 0;
  for (cJSON *sec = root->child; sec; sec = sec->next) {
    cJSON *items = cJSON_IsObject(sec) ? sec->child : sec;
    for (cJSON *it = items; it; it = cJSON_IsObject(sec) ? it->next : NULL) {
      char want[128];
      snprintf(want, sizeof want, "| `%s` |", it->string);
      if (!strstr(doc, want)) print_message("docs/config.md lacks a row for %s\n", it->string);
      assert_non_null(strstr(doc, want));
      nkeys++;
    }
  }
  assert_true(nkeys > 60);
  cJSON_Delete(root);
  mt_config_free(&cfg);
}


int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_example_file), cmocka_unit_test(test_defaults),
      cmocka_unit_test(test_overrides),    cmocka_unit_test(test_errors),
      cmocka_unit_test(test_syntax_error), cmocka_unit_test(test_docs_list_every_key),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
