/* tools/generate_cli.c — `megatrain generate` (see tools/cli.h): build
 * the model of a layout-free checkpoint for this process's layout (one
 * process, or tensor parallelism over every rank of mpirun), load its
 * parameters, tokenise the prompt with the GPT-2 BPE, decode with a KV cache
 * (model/gpt_infer.h), sample (tools/sampling.h) and print the text and
 * the speed. Rank 0 prints; every rank runs the model. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/registry.h"
#include "core/util.h"
#include "data/tokenizer.h"
#include "tools/hf_tokenizer_files.h"
#include "model/gpt_infer.h"
#include "tools/cli.h"
#include "checkpoint/views.h"
#include "checkpoint/dist_checkpoint.h"
#include "tools/sampling.h"
#include "trainer/train_internal.h"

typedef struct {
  const char *load, *prompt, *vocab, *merges, *dump_logits, *tok_type, *tok_model;
  const char *device; /* --device: NULL = the checkpoint config's */
  int max_new, no_cache, print_ids;
  int mla_absorb; /* --mla-absorb: weight absorption in the MLA decode */
  int pp; /* --pipeline-model-parallel-size: stages (the ranks / pp form the TP group) */
  int threads; /* --num-threads: -1 = the config's training.num_threads */
  mt_sample_opts s;
} gen_args;

static int usage_error(const char *msg, const char *arg) {
  fprintf(stderr, "megatrain generate: error: %s%s%s (see megatrain --help)\n", msg,
          arg ? " " : "", arg ? arg : "");
  return 2;
}

static const char gen_usage[] =
    "usage: megatrain generate --load DIR --prompt TEXT [--max-new-tokens N]\n"
    "         [--temperature T] [--top-k K] [--top-p P] [--seed S]\n"
    "         [--vocab-file F --merge-file M | --tokenizer-type T --tokenizer-model P]\n"
    "         [--no-kv-cache] [--print-ids] [--pipeline-model-parallel-size P]\n"
    "         [--num-threads N] [--dump-logits FILE] [--device cpu|cuda] [--mla-absorb]\n"
    "  stdout: the text (and the ids with --print-ids); stderr: the speed line\n"
    "  mpirun -np N: P pipeline stages (default 1) of N / P tensor-parallel ranks each\n"
    "  --dump-logits FILE: each sampled step's logits, float32, vocab_size per step\n"
    "  --mla-absorb: multi-latent attention attends over the cached latents with W_UK\n"
    "    folded into the queries and W_UV after (DeepSeek-V2 2.1.2)\n";

/* Parse an integer of the flag at argv[i + 1] in [lo, hi]; 0 or exit 2. */
static int int_arg(int argc, char **argv, int i, long long lo, long long hi, long long *out) {
  if (i + 1 >= argc) return usage_error("a value is needed after", argv[i]);
  char *end;
  errno = 0;
  long long v = strtoll(argv[i + 1], &end, 10);
  if (end == argv[i + 1] || *end || errno || v < lo || v > hi) {
    fprintf(stderr, "megatrain generate: error: %s '%s': expected an integer in [%lld, %lld]\n",
            argv[i], argv[i + 1], lo, hi);
    return 2;
  }
  *out = v;
  return 0;
}

/* Parse a number of the flag at argv[i + 1]; 0 or the exit status 2. */
static int num_arg(int argc, char **argv, int i, double lo, double hi, double *out) {
  if (i + 1 >= argc) return usage_error("a value is needed after", argv[i]);
  char *end;
  double v = strtod(argv[i + 1], &end);
  if (end == argv[i + 1] || *end || !(v >= lo && v <= hi)) {
    fprintf(stderr,
            "megatrain generate: error: %s '%s': expected a number in [%g, %g]\n", argv[i],
            argv[i + 1], lo, hi);
    return 2;
  }
  *out = v;
  return 0;
}

static int parse(int argc, char **argv, gen_args *a) {
  a->max_new = 32;
  a->pp = 1;
  a->threads = -1;
  a->s.temperature = 1.0f;
  a->s.top_p = 1.0f;
  a->s.seed = 1234;
  for (int i = 0; i < argc; i++) {
    const char *k = argv[i];
    double v;
    long long iv;
    int rc = 0;
    if (!strcmp(k, "--help") || !strcmp(k, "-h")) {
      fputs(gen_usage, stdout);
      return -1;
    }
    const char **str = !strcmp(k, "--load")           ? &a->load
                       : !strcmp(k, "--prompt")       ? &a->prompt
                       : !strcmp(k, "--vocab-file")   ? &a->vocab
                       : !strcmp(k, "--merge-file")   ? &a->merges
                       : !strcmp(k, "--tokenizer-type") ? &a->tok_type
                       : !strcmp(k, "--tokenizer-model") ? &a->tok_model
                       : !strcmp(k, "--dump-logits")  ? &a->dump_logits
                       : !strcmp(k, "--device")       ? &a->device
                                                      : NULL;
    if (str) {
      if (i + 1 >= argc) return usage_error("a value is needed after", k);
      *str = argv[++i];
    } else if (!strcmp(k, "--no-kv-cache")) {
      a->no_cache = 1;
    } else if (!strcmp(k, "--mla-absorb")) {
      a->mla_absorb = 1;
    } else if (!strcmp(k, "--print-ids")) {
      a->print_ids = 1;
    } else if (!strcmp(k, "--max-new-tokens")) {
      if ((rc = int_arg(argc, argv, i++, 1, 1000000000, &iv))) return rc;
      a->max_new = (int)iv;
    } else if (!strcmp(k, "--temperature")) {
      if ((rc = num_arg(argc, argv, i++, 0, 1e6, &v))) return rc;
      a->s.temperature = (float)v;
    } else if (!strcmp(k, "--pipeline-model-parallel-size")) {
      if ((rc = int_arg(argc, argv, i++, 1, 1 << 20, &iv))) return rc;
      a->pp = (int)iv;
    } else if (!strcmp(k, "--top-k")) {
      if ((rc = int_arg(argc, argv, i++, 0, 1000000000, &iv))) return rc;
      a->s.top_k = (int)iv;
    } else if (!strcmp(k, "--top-p")) {
      if ((rc = num_arg(argc, argv, i++, 1e-9, 1, &v))) return rc;
      a->s.top_p = (float)v;
    } else if (!strcmp(k, "--num-threads")) {
      if ((rc = int_arg(argc, argv, i++, 0, 4096, &iv))) return rc;
      a->threads = (int)iv;
    } else if (!strcmp(k, "--seed")) { /* any uint64, exactly */
      if (i + 1 >= argc) return usage_error("a value is needed after", k);
      char *end;
      errno = 0;
      unsigned long long sv = strtoull(argv[i + 1], &end, 10);
      if (end == argv[i + 1] || *end || errno || argv[i + 1][0] == '-') {
        fprintf(stderr, "megatrain generate: error: --seed '%s': expected an integer in [0, 2^64)\n",
                argv[i + 1]);
        return 2;
      }
      a->s.seed = (uint64_t)sv;
      i++;
    } else {
      return usage_error("unknown argument", k);
    }
  }
  if (!a->load) return usage_error("--load DIR is required", NULL);
  if (!a->prompt) return usage_error("--prompt TEXT is required", NULL);
  return 0;
}

/* The largest status over the ranks (errors agree across ranks); *n_bad =
 * how many ranks failed. */
static int agree(mt_group *world, int rc, int *n_bad) {
  int64_t v[2] = {rc, rc != 0};
  mt_allreduce(world, &v[0], 1, MT_I64, MT_OP_MAX);
  mt_allreduce(world, &v[1], 1, MT_I64, MT_OP_SUM);
  *n_bad = (int)v[1];
  return (int)v[0];
}

/* Everything one run holds (freed by teardown). */
typedef struct {
  mt_dist *dist;
  mt_group *world;
  int rank, world_size;
  mt_dckpt *ck;
  mt_config cfg;
  int cfg_loaded;
  mt_topology topo;
  int topo_built;
  mt_parallel_state *ps;
  mt_backend *be;
  mt_gpt *model;
  mt_gpt_infer *inf;
  mt_tokenizer *tok;
  mt_tok_encoder *enc;
  int n_skip; /* leading template ids (BOS) not printed */
  mt_sampler *smp;
  mt_tokvec ids;
  float *logits;
  FILE *dump;
} gen_run;

static void teardown(gen_run *r) {
  if (r->dump) fclose(r->dump);
  free(r->logits);
  mt_tokvec_free(&r->ids);
  mt_sampler_free(r->smp);
  mt_tok_encoder_free(r->enc);
  mt_tokenizer_free(r->tok);
  mt_gpt_infer_destroy(r->inf);
  if (r->model) mt_gpt_destroy(r->model);
  if (r->be) mt_backend_destroy(r->be);
  if (r->be && r->dist) mt_dist_set_backend(r->dist, NULL);
  if (r->ps) mt_parallel_state_destroy(r->ps);
  if (r->topo_built) mt_topology_free(&r->topo);
  if (r->cfg_loaded) mt_config_free(&r->cfg);
  if (r->ck) mt_dckpt_close(r->ck);
}

/* The config does not fit tensor parallelism over all `ws` ranks: say so,
 * naming the heads when they are what does not divide. */
static void explain_tp(const char *json, const char *where, const char **sets, int n_sets, int ws,
                       char *err, size_t errlen) {
  mt_config c1;
  char e1[512];
  const char *s0 = sets[0], *s1 = sets[1];
  sets[0] = "parallel.tensor_model_parallel_size=1";
  sets[1] = "parallel.expert_tensor_parallel_size=null";
  int rc = mt_config_load_saved(&c1, json, where, sets, n_sets, 1, e1, sizeof e1);
  sets[0] = s0;
  sets[1] = s1;
  if (rc) return; /* the config itself is bad: err says why */
  int h = c1.model.num_attention_heads, g = c1.model.num_query_groups;
  if (c1.model.num_experts > 0)
    snprintf(err, errlen,
             "generate runs a model with experts (model.num_experts %d in %s) in one process, "
             "not with tensor parallelism over %d ranks (expected one process without mpirun)",
             c1.model.num_experts, where, ws);
  else if (h % ws || g % ws)
    snprintf(err, errlen,
             "generate runs with tensor parallelism over all %d ranks, and %d does not divide the "
             "model's %d %s (%s in %s; expected a number of ranks that divides it, e.g. one "
             "process without mpirun)",
             ws, ws, h % ws ? h : g, h % ws ? "attention heads" : "query groups",
             h % ws ? "model.num_attention_heads" : "model.num_query_groups", where);
  else { /* prefix err, in place */
    char pre[96];
    size_t n = (size_t)snprintf(pre, sizeof pre,
                                "generate runs with tensor parallelism over all %d ranks: ", ws);
    size_t len = strlen(err);
    if (n + len + 1 > errlen) len = errlen - n - 1;
    memmove(err + n, err, len);
    err[n + len] = 0;
    memcpy(err, pre, n);
  }
  mt_config_free(&c1);
}

/* The checkpoint's config for generation on world_size ranks: tensor
 * parallelism over all of them, nothing else parallel, one sequence. */
static int load_config(gen_run *r, const gen_args *a, char *err, size_t errlen) {
  int rc = mt_dckpt_open(a->load, -1, &r->ck, err, errlen);
  if (rc == 1) {
    snprintf(err, errlen,
             "%s holds a checkpoint of the per-layout format (mp_rank_*): generate reads the "
             "layout-free format (convert it with `megatrain convert --upgrade`)",
             a->load);
    return 1;
  }
  if (rc != 0) return 1;
  const char *json = mt_dckpt_config_json(r->ck);
  if (!json || !strcmp(json, "null")) {
    snprintf(err, errlen, "%s: metadata.json has no \"config\" (expected the model's config)",
             mt_dckpt_dir(r->ck));
    return 1;
  }
  if (r->world_size % a->pp) {
    snprintf(err, errlen, "--pipeline-model-parallel-size %d does not divide the %d ranks "
             "(expected a divisor: each stage has ranks / stages tensor-parallel ranks)", a->pp,
             r->world_size);
    return 2;
  }
  char tp[64], pps[64];
  snprintf(tp, sizeof tp, "parallel.tensor_model_parallel_size=%d", r->world_size / a->pp);
  snprintf(pps, sizeof pps, "parallel.pipeline_model_parallel_size=%d", a->pp);
  /* one layout: tensor parallelism over all ranks; the keys of the other
   * kinds of parallelism left out (null: derived or default), so that none
   * is given where it has no effect */
  const char *sets[] = {tp, "parallel.expert_tensor_parallel_size=null", pps,
                        "parallel.virtual_pipeline_model_parallel_size=null",
                        "parallel.num_layers_in_first_pipeline_stage=null",
                        "parallel.num_layers_in_last_pipeline_stage=null",
                        "parallel.context_parallel_size=1",
                        "parallel.expert_model_parallel_size=null",
                        "parallel.sequence_parallel=false",
                        "parallel.zero_stage=0",
                        "training.micro_batch_size=1",
                        "training.global_batch_size=1",
                        "model.recompute_granularity=null",
                        NULL, NULL, NULL}; /* room for --num-threads and --device */
  int n_sets = (int)(sizeof sets / sizeof sets[0]) - 3;
  char thr[64], dev[64];
  snprintf(thr, sizeof thr, "training.num_threads=%d", a->threads);
  if (a->threads >= 0) sets[n_sets++] = thr;
  /* --device: the device the checkpoint is sampled on, whatever trained it
   * (checked by the config loader like the config's own "device") */
  if (a->device) {
    snprintf(dev, sizeof dev, "device=%.50s", a->device);
    sets[n_sets++] = dev;
  }
  char where[600];
  snprintf(where, sizeof where, "%s/metadata.json", mt_dckpt_dir(r->ck));
  rc = mt_config_load_saved(&r->cfg, json, where, sets, n_sets, r->world_size, err, errlen);
  if (rc && r->world_size / a->pp > 1)
    explain_tp(json, where, sets, n_sets, r->world_size / a->pp, err, errlen);
  if (rc) return rc;
  r->cfg_loaded = 1;
  return 0;
}

/* The MoE routers' expert biases (host fp32 [E] per MoE layer, buffers
 * "decoder.layers.L.mlp.router.expert_bias", an MTP depth's
 * "mtp.layers.K.mtp_model_layer.mlp.router.expert_bias") when the model has them: they
 * select the experts, so generation needs them as training left them. */
static int load_expert_bias(gen_run *r, char *err, size_t errlen) {
  const mt_gpt_config *gc = mt_gpt_get_config(r->model);
  for (int i = 0; i < mt_gpt_num_moe_layers(gc); i++) {
    float *bias = mt_gpt_moe_expert_bias(r->model, i);
    if (!bias) return 0;
    if (mt_gpt_moe_layer_is_local(r->model, i) < 0) continue; /* another stage's layer */
    char pre[64], nm[96]; /* decoder.layers.L or mtp.layers.K.mtp_model_layer */
    mt_gpt_layer_name(gc, mt_gpt_moe_layer_is_local(r->model, i), pre, sizeof pre);
    snprintf(nm, sizeof nm, "%s.mlp.router.expert_bias", pre);
    int64_t rows, cols;
    mt_dtype dt;
    int k = mt_dckpt_find(r->ck, nm);
    if (k >= 0) mt_dckpt_tensor_shape(r->ck, k, &rows, &cols, &dt);
    if (k < 0 || rows * cols != gc->model.num_experts) {
      snprintf(err, errlen, "%s has %s '%s' (expected %d fp32 values: the model routes with an "
               "expert bias)", mt_dckpt_dir(r->ck), k < 0 ? "no tensor" : "a wrong-sized", nm,
               gc->model.num_experts);
      return 1;
    }
    float *t = mt_dckpt_read_tensor(r->ck, nm, MT_F32, err, errlen);
    if (!t) return 1;
    memcpy(bias, t, sizeof(float) * (size_t)gc->model.num_experts);
    free(t);
  }
  return 0;
}

/* Backend, groups, model and its parameters from the checkpoint. */
static int build_model(gen_run *r, const gen_args *a, int max_len, char *err, size_t errlen) {
  const mt_config *c = &r->cfg;
  mt_topology_sizes sz = {.tensor_model_parallel_size = r->world_size / a->pp,
                          .pipeline_model_parallel_size = a->pp,
                          .expert_model_parallel_size = 1,
                          .expert_tensor_parallel_size = c->parallel.expert_tensor_parallel_size,
                          .context_parallel_size = 1};
  if (mt_topology_build(&r->topo, r->world_size, &sz, err, errlen) != 0) return 2;
  r->topo_built = 1;
  mt_backend_options bo = {.device = c->device,
                           .num_threads = c->training.num_threads,
                           .local_rank = mt_dist_local_rank(r->dist),
                           .dtype = strcmp(c->training.precision, "bf16") ? MT_F32 : MT_BF16};
  mt_backends_process_init(&bo);
  r->be = mt_backend_create(&bo, err, errlen);
  if (!r->be) return 1;
  mt_dist_set_backend(r->dist, r->be); /* before the groups (comm.h) */
  r->ps = mt_parallel_state_create(
      r->dist, &r->topo, mt_comm_engine_choose(r->be, c->parallel.distributed_backend));
  mt_gpt_config gc = mt_trainer_model_config(c, r->ps);
  gc.skip_init = 1; /* every parameter comes from the checkpoint */
  r->model = mt_gpt_create(r->be, &gc);
  mt_gpt_release_flat_buffers(r->model, 0, 1); /* no gradients in inference */
  mt_dckpt_view *v = NULL;
  int n = 0;
  mt_ckpt_model_param_views(r->model, c->model.vocab_size, 0, 0, &v, &n);
  int rc = mt_dckpt_load(r->ck, r->be, v, n, err, errlen);
  free(v);
  if (rc != 0) return 1;
  if (load_expert_bias(r, err, errlen)) return 1;
  r->inf = mt_gpt_infer_create(r->model, a->pp > 1 ? r->ps->pp : NULL, max_len, !a->no_cache, err,
                               errlen);
  if (!r->inf) return 1;
  if (a->mla_absorb && mt_gpt_infer_mla_absorb(r->inf, err, errlen)) return 2; /* usage */
  return 0;
}

/* The tokenizer of the checkpoint's config (data.tokenizer_type and its
 * files), or of the flags. A tokenizer_model path that does not load falls
 * back to the tokenizer files in the checkpoint directory (`convert --from
 * hf` copies them there). */
static int load_tokenizer(gen_run *r, const gen_args *a, char *err, size_t errlen) {
  const mt_data_config *d = &r->cfg.data;
  const char *type = a->tok_type ? a->tok_type : d->tokenizer_type;
  if (a->tok_model && !a->tok_type && mt_tokenizer_type_parse(type) == MT_TOK_GPT2BPE) {
    snprintf(err, errlen, "--tokenizer-model needs --tokenizer-type HuggingFaceTokenizer or "
             "SentencePieceTokenizer (the checkpoint's config uses GPT2BPETokenizer)");
    return 1;
  }
  if (mt_tokenizer_type_parse(type) == MT_TOK_GPT2BPE) {
    const char *vf = a->vocab ? a->vocab : d->vocab_file[0] ? d->vocab_file : NULL;
    const char *mf = a->merges ? a->merges : d->merge_file[0] ? d->merge_file : NULL;
    if (!vf || !mf) {
      snprintf(err, errlen,
               "no GPT-2 tokenizer files: pass --vocab-file FILE and --merge-file FILE, or set "
               "data.vocab_file and data.merge_file in the config the checkpoint was trained with");
      return 1;
    }
    mt_tokenizer_spec spec = {.type = type, .vocab_file = vf, .merge_file = mf};
    r->tok = mt_tokenizer_load(&spec, err, errlen);
    if (!r->tok && (!a->vocab || !a->merges)) {
      char tail[2048];
      snprintf(tail, sizeof tail, "%.2000s", err);
      snprintf(err, errlen,
               "%.1500s (the tokenizer paths %s%s%s come from data.vocab_file/data.merge_file in "
               "the config of %s/metadata.json; pass --vocab-file FILE and --merge-file FILE)",
               tail, a->vocab ? "" : vf, !a->vocab && !a->merges ? ", " : "",
               a->merges ? "" : mf, mt_dckpt_dir(r->ck));
    }
  } else {
    const char *model = a->tok_model ? a->tok_model : d->tokenizer_model;
    mt_tokenizer_spec spec = {.type = type, .model = model};
    r->tok = mt_tokenizer_load(&spec, err, errlen);
    char ftype[64], fmodel[4200];
    if (!r->tok && !a->tok_model &&
        mt_hf_tokenizer_find(mt_dckpt_dir(r->ck), ftype, sizeof ftype, fmodel, sizeof fmodel) &&
        !strcmp(ftype, type)) {
      char first[1024];
      snprintf(first, sizeof first, "%.1000s", err);
      spec.model = fmodel;
      r->tok = mt_tokenizer_load(&spec, err, errlen);
      if (r->tok && r->rank == 0)
        fprintf(stderr, "generate: note: %.600s; using the tokenizer in %s\n", first, fmodel);
    }
  }
  if (!r->tok) return 1;
  if (mt_tokenizer_vocab_size(r->tok) > r->cfg.model.vocab_size) {
    snprintf(err, errlen,
             "the %s tokenizer has %d ids but the checkpoint's model.vocab_size is %d (expected "
             "at most %d)",
             mt_tokenizer_name(r->tok), mt_tokenizer_vocab_size(r->tok), r->cfg.model.vocab_size,
             r->cfg.model.vocab_size);
    return 1;
  }
  r->enc = mt_tok_encoder_new(r->tok);
  return 0;
}

/* The run after the model is loaded: prefill, decode loop, output. */
static int decode(gen_run *r, const gen_args *a, size_t n_prompt) {
  const int64_t V = r->cfg.model.vocab_size;
  const int eod = mt_tokenizer_eod(r->tok);
  r->logits = mt_xmalloc((size_t)V * sizeof(float));
  r->smp = mt_sampler_create(&a->s, V);
  mt_group *world = r->world;
  double t0 = mt_now();
  mt_gpt_infer_append(r->inf, r->ids.data, (int)n_prompt, r->logits);
  double t1 = mt_now(), t_prefill = t1 - t0;
  int n_new = 0, stop_eod = 0;
  while (n_new < a->max_new) {
    int64_t next = mt_sample_next(r->smp, r->logits, n_new);
    mt_broadcast(world, &next, 1, MT_I64, 0); /* rank 0's choice (all compute the same) */
    if (r->dump) fwrite(r->logits, sizeof(float), (size_t)V, r->dump);
    mt_tokvec_push(&r->ids, (int32_t)next);
    n_new++;
    if (next == eod) {
      stop_eod = 1;
      break;
    }
    if (n_new == a->max_new) break;
    int32_t tok = (int32_t)next;
    mt_gpt_infer_append(r->inf, &tok, 1, r->logits);
  }
  double t_decode = mt_now() - t1;
  if (r->rank != 0) return 0;
  size_t len;
  size_t n_text = r->ids.n - (size_t)stop_eod; /* the end-of-text token is not printed */
  char *text =
      mt_tokenizer_decode(r->tok, r->ids.data + r->n_skip, n_text - (size_t)r->n_skip, &len);
  fwrite(text, 1, len, stdout);
  fputc('\n', stdout);
  free(text);
  if (a->print_ids) {
    printf("prompt_ids:");
    for (size_t i = 0; i < n_prompt; i++) printf(" %d", r->ids.data[i]);
    printf("\nids:");
    for (size_t i = 0; i < r->ids.n; i++) printf(" %d", r->ids.data[i]);
    printf("\n");
  }
  char pp_note[32] = "";
  if (a->pp > 1) snprintf(pp_note, sizeof pp_note, ", pp %d", a->pp);
  /* decode steps after the first token (its logits came from the prefill) */
  int steps = n_new > 1 ? n_new - 1 : 0;
  fflush(stdout);
  fprintf(stderr, "generate: %zu prompt tokens, prefill %.3f s (%.1f tokens/s); %d new tokens%s, decode "
         "%.3f s (%.1f tokens/s); kv cache %s, tp %d%s\n",
         n_prompt, t_prefill, t_prefill > 0 ? (double)n_prompt / t_prefill : 0.0, n_new,
         stop_eod ? " (end of text)" : "", t_decode,
         t_decode > 0 && steps > 0 ? (double)steps / t_decode : 0.0, a->no_cache ? "off" : "on",
         r->world_size / a->pp, pp_note);
  int64_t kv_cache, kv_full;
  mt_gpt_infer_kv_bytes(r->model, &kv_cache, &kv_full);
  fprintf(stderr,
          "generate: kv cache %lld bytes per token (all layers, %s), %lld with full K/V (%.2fx)%s\n",
          (long long)kv_cache, mt_dtype_name(r->be->dtype), (long long)kv_full,
          (double)kv_full / (double)kv_cache,
          mt_gpt_get_config(r->model)->model.multi_latent_attention
              ? ": multi-latent attention caches the kv latent and the rotated key"
              : "");
  fflush(stdout);
  return 0;
}

/* The prompt's ids as preprocess makes a document's (the post-processor's
 * BOS first for HuggingFaceTokenizer; it is not printed); an empty prompt
 * without one starts from the end-of-text token (printed), as GPT-2's
 * unconditional samples; and the length limit. */
static int encode_prompt(gen_run *r, const gen_args *a, char *err, size_t errlen) {
  mt_tok_encode_doc(r->enc, a->prompt, strlen(a->prompt), 1, &r->ids);
  if (mt_tokenizer_kind(r->tok) == MT_TOK_HF) {
    const int32_t *pre, *suf;
    int np, ns;
    mt_bpe_template(mt_tokenizer_bpe(r->tok), &pre, &np, &suf, &ns);
    r->ids.n -= (size_t)ns; /* the text continues: no EOS after the prompt */
    r->n_skip = np;
  }
  if (r->ids.n == 0 && mt_tokenizer_eod(r->tok) >= 0) mt_tokvec_push(&r->ids, mt_tokenizer_eod(r->tok));
  const int64_t limit = r->cfg.model.max_position_embeddings, n = (int64_t)r->ids.n;
  if (n > limit) {
    snprintf(err, errlen,
             "the prompt is %lld tokens, longer than the model's max_position_embeddings %lld",
             (long long)n, (long long)limit);
    return 1;
  }
  if (n + a->max_new > limit) {
    snprintf(err, errlen,
             "--max-new-tokens %d: the prompt (%lld tokens) plus the new tokens exceed the "
             "model's max_position_embeddings %lld (expected at most %lld new tokens)",
             a->max_new, (long long)n, (long long)limit, (long long)(limit - n));
    return 2;
  }
  return 0;
}

int mt_cli_generate(int argc, char **argv) {
  gen_args a = {0};
  int rc = parse(argc, argv, &a), n_bad = 0;
  if (rc == -1) return 0; /* --help */
  if (rc) return rc;
  gen_run r = {0};
  r.dist = mt_dist_init(&argc, &argv);
  r.world = mt_dist_world(r.dist);
  r.rank = mt_dist_rank(r.dist);
  r.world_size = mt_dist_size(r.dist);
  char err[4096] = "";
  if ((rc = agree(r.world, load_config(&r, &a, err, sizeof err), &n_bad))) goto fail;
  if ((rc = agree(r.world, load_tokenizer(&r, &a, err, sizeof err), &n_bad))) goto fail;
  if ((rc = agree(r.world, encode_prompt(&r, &a, err, sizeof err), &n_bad))) goto fail;
  const int max_len = (int)r.ids.n + a.max_new;
  if ((rc = agree(r.world, build_model(&r, &a, max_len, err, sizeof err), &n_bad))) goto fail;
  int d = 0;
  if (a.dump_logits && r.rank == 0 && !(r.dump = fopen(a.dump_logits, "wb"))) {
    snprintf(err, sizeof err, "cannot write %s (--dump-logits)", a.dump_logits);
    d = 1;
  }
  if ((rc = agree(r.world, d, &n_bad))) goto fail;
  rc = decode(&r, &a, r.ids.n);
  teardown(&r);
  mt_dist_finalize(r.dist);
  return rc;
fail:
  /* the same message from every rank is printed once */
  if (err[0] && (r.rank == 0 || n_bad < r.world_size)) {
    char who[32] = "";
    if (r.rank) snprintf(who, sizeof who, "[rank %d] ", r.rank);
    fprintf(stderr, "%smegatrain generate: error: %s\n", who, err);
  }
  teardown(&r);
  mt_dist_finalize(r.dist);
  return rc;
}
