/* planner/plan_cli.c — `megatrain plan`: argument parsing (the output is
 * planner/plan_print.c).
 *
 *   megatrain plan --config FILE --world-size N --hardware H [--set k=v]...
 *                  [--overlap-grad-reduce] [--overlap-param-gather] [--overlap-p2p-comm]
 *                  [--moe-shared-expert-overlap] [--moe-load-factor X]
 *                  [--moe-recv-rows R [--moe-expert-rows RX]] [--json] [--sweep [--top K]]
 *                  [--fp8-format F [--fp8-recipe R] [--no-fp8-wgrad] [--fp8-param-gather]
 *                   [--num-layers-at-start-in-bf16 N] [--num-layers-at-end-in-bf16 N]]
 * H is a path or a name under configs/hardware/ (a100-80gb, h100-sxm, h200-sxm, h800-sxm,
 * b200). The --fp8-* flags are Megatron's and set the training keys of the same names
 * after the config is loaded: the trainer still refuses FP8 on device cuda and
 * fp8_param_gather beyond ZeRO-1/2 dense tensorwise/blockwise runs
 * (config/config_rules_fp8.c), the planner models them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "planner/plan.h"

static void usage(FILE *f) {
  fprintf(f,
          "usage: megatrain plan --config FILE --world-size N --hardware H [--set k=v]...\n"
          "                      [--overlap-grad-reduce] [--overlap-param-gather]\n"
          "                      [--overlap-p2p-comm] [--moe-shared-expert-overlap]\n"
          "                      [--moe-load-factor X] [--moe-recv-rows R [--moe-expert-rows RX]]\n"
          "                      [--json] [--sweep [--top K]]\n"
          "                      [--fp8-format e4m3|hybrid [--fp8-recipe R] [--no-fp8-wgrad]\n"
          "                       [--fp8-param-gather] [--num-layers-at-start-in-bf16 N]\n"
          "                       [--num-layers-at-end-in-bf16 N]]\n"
          "  predict per-rank memory and iteration time of the config on N GPUs of type H\n"
          "  (a JSON file, or a name under configs/hardware/: a100-80gb, h100-sxm, h200-sxm).\n"
          "  --sweep ranks every valid layout (tp, pp, v, ep, zero, recompute, micro-batch)\n"
          "  that fits by predicted throughput. --fp8-* plan FP8 linear layers (Megatron's\n"
          "  flags; R: tensorwise, delayed, blockwise, mxfp8) where the trainer does not run\n"
          "  them yet. See docs/planner.md.\n");
}

/* The --fp8-* flags (NULL / -1: not given), applied to the loaded config. */
typedef struct {
  const char *format, *recipe;
  int no_wgrad, param_gather, at_start, at_end;
} fp8_flags;

static int in_list(const char *v, const char *const *list) {
  for (; *list; list++)
    if (!strcmp(v, *list)) return 1;
  return 0;
}

/* Sets cfg's FP8 training keys from the flags, with Megatron's checks.
 * Returns 0, or 2 with a message on stderr. */
static int apply_fp8(mt_config *cfg, const fp8_flags *f) {
  static const char *const formats[] = {"e4m3", "hybrid", NULL};
  static const char *const recipes[] = {"tensorwise", "delayed", "blockwise", "mxfp8", NULL};
  mt_training_config *t = &cfg->training;
  const int any = f->recipe || f->no_wgrad || f->param_gather || f->at_start >= 0 || f->at_end >= 0;
  if (!f->format && !any) return 0;
  const char *bad = NULL, *val = NULL, *want = NULL;
  if (!f->format && !t->fp8_format[0]) {
    bad = "--fp8-recipe, --no-fp8-wgrad, --fp8-param-gather or --num-layers-at-*-in-bf16";
    val = "without FP8";
    want = "--fp8-format e4m3 or hybrid with them, or training.fp8_format";
  } else if (f->format && !in_list(f->format, formats)) {
    bad = "--fp8-format", val = f->format, want = "e4m3 or hybrid";
  } else if (f->recipe && !in_list(f->recipe, recipes)) {
    bad = "--fp8-recipe", val = f->recipe, want = "tensorwise, delayed, blockwise or mxfp8";
  } else if (strcmp(t->precision, "bf16")) {
    bad = "--fp8-format with training.precision", val = t->precision;
    want = "precision bf16: FP8 linears run under bf16 mixed precision";
  } else if (f->param_gather && cfg->parallel.zero_stage < 1) {
    bad = "--fp8-param-gather with parallel.zero_stage", val = "0";
    want = "zero_stage >= 1: it changes the distributed optimizer's parameter all-gather, "
           "which zero_stage 0 does not run";
  }
  if (bad) {
    fprintf(stderr, "megatrain plan: error: %s %s (expected %s)\n", bad, val, want);
    return 2;
  }
  if (f->format) snprintf(t->fp8_format, sizeof t->fp8_format, "%s", f->format);
  if (f->recipe) snprintf(t->fp8_recipe, sizeof t->fp8_recipe, "%s", f->recipe);
  if (!t->fp8_recipe[0]) snprintf(t->fp8_recipe, sizeof t->fp8_recipe, "delayed");
  if (f->no_wgrad) t->fp8_wgrad = 0;
  if (f->param_gather) t->fp8_param_gather = 1;
  if (f->at_start >= 0 || f->at_end >= 0) {
    t->first_last_layers_bf16 = 1;
    if (f->at_start >= 0) t->num_layers_at_start_in_bf16 = f->at_start;
    if (f->at_end >= 0) t->num_layers_at_end_in_bf16 = f->at_end;
  }
  if (t->first_last_layers_bf16 &&
      (long long)t->num_layers_at_start_in_bf16 + t->num_layers_at_end_in_bf16 >
          cfg->model.num_layers) {
    fprintf(stderr, "megatrain plan: error: --num-layers-at-start-in-bf16 %d plus "
            "--num-layers-at-end-in-bf16 %d exceed model.num_layers %d (expected at most "
            "num_layers layers kept in bf16)\n", t->num_layers_at_start_in_bf16,
            t->num_layers_at_end_in_bf16, cfg->model.num_layers);
    return 2;
  }
  return 0;
}

/* A non-negative integer flag value, or -2 (reported) when it is not one. */
static int count_arg(const char *flag, const char *v) {
  char *end;
  long n = strtol(v, &end, 10);
  if (*v && !*end && n >= 0 && n <= 1000000) return (int)n;
  fprintf(stderr, "megatrain plan: error: %s '%s' (expected an integer >= 0)\n", flag, v);
  return -2;
}

/* "a100-80gb" -> configs/hardware/a100-80gb.json when the argument is not a file. */
static void resolve_hw(const char *arg, char *out, size_t n) {
  if (access(arg, F_OK) == 0 || strchr(arg, '/')) {
    snprintf(out, n, "%s", arg);
    return;
  }
  size_t len = strlen(arg);
  const char *ext = len > 5 && !strcmp(arg + len - 5, ".json") ? "" : ".json";
  snprintf(out, n, "configs/hardware/%s%s", arg, ext);
  if (access(out, F_OK) == 0) return;
  /* not run from the repository root: look next to the executable */
  char exe[MT_PATH_MAX];
  ssize_t k = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (k <= 0) return;
  exe[k] = '\0';
  char *slash = strrchr(exe, '/');
  if (!slash) return;
  *slash = '\0';
  char alt[MT_PATH_MAX + 128];
  snprintf(alt, sizeof alt, "%s/configs/hardware/%s%s", exe, arg, ext);
  size_t len_alt = strlen(alt);
  if (access(alt, F_OK) == 0 && len_alt < n) memcpy(out, alt, len_alt + 1);
}

/* The MoE routing options need a dropless MoE model (padding fixes the
 * rows at E C); given rows describe one layout, not a sweep's. */
static int check_moe_opts(const mt_config *cfg, const mt_plan_options *o, int sweep, char *err,
                          size_t n) {
  const char *flag = o->moe_load_factor > 0 ? "--moe-load-factor"
                     : o->moe_rows_given    ? "--moe-recv-rows"
                                            : NULL;
  if (!flag) return 0;
  if (cfg->model.num_experts <= 0) {
    snprintf(err, n, "%s has no effect: the model has no experts (model.num_experts)", flag);
    return 2;
  }
  if (cfg->model.moe_pad_expert_input_to_capacity) {
    snprintf(err, n, "%s has no effect: model.moe_pad_expert_input_to_capacity fixes the MoE "
             "buffers at E x C rows", flag);
    return 2;
  }
  if (o->moe_load_factor > 0 && o->moe_rows_given) {
    snprintf(err, n, "--moe-load-factor and --moe-recv-rows / --moe-expert-rows exclude each "
             "other (given rows replace the routing assumption)");
    return 2;
  }
  if (o->moe_rows_given == 2) {
    snprintf(err, n, "--moe-expert-rows needs --moe-recv-rows");
    return 2;
  }
  if (o->moe_rows_given && sweep) {
    snprintf(err, n, "--moe-recv-rows describes one layout's run; --sweep changes the layout");
    return 2;
  }
  return 0;
}

int mt_plan_main(int argc, char **argv) {
  const char *config = NULL, *hw_arg = NULL;
  int world = 0, json = 0, sweep = 0, top = 20;
  mt_plan_options opt = {0};
  fp8_flags f8 = {NULL, NULL, 0, 0, -1, -1};
  const char **sets = calloc((size_t)argc + 16, sizeof(char *)); /* + k_single below */
  int n_sets = 0, rc = 0;
  for (int i = 1; i < argc && !rc; i++) {
    const char *a = argv[i];
    const char *val = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--config") && val) config = argv[++i];
    else if (!strcmp(a, "--world-size") && val) {
      char *end;
      long w = strtol(argv[++i], &end, 10);
      if (*end || w < 1 || w > 1000000) {
        fprintf(stderr, "megatrain plan: error: --world-size '%s' (expected an integer >= 1)\n",
                argv[i]);
        rc = 2;
      }
      world = (int)w;
    } else if (!strcmp(a, "--hardware") && val) hw_arg = argv[++i];
    else if (!strcmp(a, "--set") && val) sets[n_sets++] = argv[++i];
    else if (!strcmp(a, "--top") && val) top = atoi(argv[++i]);
    else if (!strcmp(a, "--json")) json = 1;
    else if (!strcmp(a, "--sweep")) sweep = 1;
    else if (!strcmp(a, "--overlap-grad-reduce")) opt.overlap_grad_reduce = 1;
    else if (!strcmp(a, "--overlap-param-gather")) opt.overlap_param_gather = 1;
    else if (!strcmp(a, "--overlap-p2p-comm")) opt.overlap_p2p_comm = 1;
    else if (!strcmp(a, "--moe-shared-expert-overlap")) opt.moe_shared_expert_overlap = 1;
    else if (!strcmp(a, "--moe-load-factor") && val) {
      char *end;
      opt.moe_load_factor = strtod(argv[++i], &end);
      if (*end || !(opt.moe_load_factor >= 1) || opt.moe_load_factor > 1e6) {
        fprintf(stderr, "megatrain plan: error: --moe-load-factor '%s' (expected a number >= 1: "
                "the busiest rank receives at least the balanced share)\n", argv[i]);
        rc = 2;
      }
    } else if ((!strcmp(a, "--moe-recv-rows") || !strcmp(a, "--moe-expert-rows")) && val) {
      char *end;
      long long r = strtoll(argv[++i], &end, 10);
      if (*end || r < 0) {
        fprintf(stderr, "megatrain plan: error: %s '%s' (expected an integer >= 0)\n", a,
                argv[i]);
        rc = 2;
      } else if (a[6] == 'r') {
        opt.moe_recv_rows = r;
        opt.moe_rows_given |= 1;
      } else {
        opt.moe_expert_rows = r;
        opt.moe_rows_given |= 2;
      }
    } else if (!strcmp(a, "--fp8-format") && val) f8.format = argv[++i];
    else if (!strcmp(a, "--fp8-recipe") && val) f8.recipe = argv[++i];
    else if (!strcmp(a, "--no-fp8-wgrad")) f8.no_wgrad = 1;
    else if (!strcmp(a, "--fp8-param-gather")) f8.param_gather = 1;
    else if (!strcmp(a, "--num-layers-at-start-in-bf16") && val) {
      if ((f8.at_start = count_arg(a, argv[++i])) < 0) rc = 2;
    } else if (!strcmp(a, "--num-layers-at-end-in-bf16") && val) {
      if ((f8.at_end = count_arg(a, argv[++i])) < 0) rc = 2;
    }
    else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      usage(stdout);
      free(sets);
      return 0;
    } else {
      fprintf(stderr, "megatrain plan: error: unknown argument '%s'\n", a);
      usage(stderr);
      rc = 2;
    }
  }
  if (!rc && (!config || !hw_arg || world < 1)) {
    fprintf(stderr, "megatrain plan: error: --config FILE, --world-size N and --hardware H are "
            "required\n");
    usage(stderr);
    rc = 2;
  }
  if (rc) {
    free(sets);
    return rc;
  }
  char err[4096], hw_path[MT_PATH_MAX + 64];
  mt_hardware hw;
  resolve_hw(hw_arg, hw_path, sizeof hw_path);
  if (mt_hardware_load(&hw, hw_path, err, sizeof err) != 0) {
    fprintf(stderr, "megatrain plan: error: %s\n", err);
    free(sets);
    return 2;
  }
  mt_config cfg;
  /* a sweep replaces the layout, so the file's own layout need not fit N:
   * load it as a single-rank layout and let each candidate override it (the
   * layout keys a single rank does not use left out: null) */
  static const char *const k_single[] = {
      "parallel.tensor_model_parallel_size=1", "parallel.pipeline_model_parallel_size=1",
      "parallel.virtual_pipeline_model_parallel_size=null",
      "parallel.num_layers_in_first_pipeline_stage=null",
      "parallel.num_layers_in_last_pipeline_stage=null", "parallel.sequence_parallel=false",
      "parallel.expert_model_parallel_size=null", "parallel.expert_tensor_parallel_size=null",
      "training.micro_batch_size=1"};
  if (sweep)
    for (size_t i = 0; i < sizeof k_single / sizeof *k_single; i++) sets[n_sets++] = k_single[i];
  rc = mt_config_load(&cfg, config, sets, n_sets, sweep ? 1 : world, err, sizeof err);
  free(sets);
  if (rc) {
    fprintf(stderr, "megatrain plan: error: %s\n", err);
    return rc;
  }
  rc = check_moe_opts(&cfg, &opt, sweep, err, sizeof err);
  if (rc) {
    fprintf(stderr, "megatrain plan: error: %s\n", err);
    mt_config_free(&cfg);
    return rc;
  }
  if ((rc = apply_fp8(&cfg, &f8)) != 0) {
    mt_config_free(&cfg);
    return rc;
  }
  if (!sweep && cfg.notes[0] && !json) fprintf(stdout, "note: %s\n", cfg.notes);
  if (sweep) {
    rc = mt_plan_sweep(&cfg, world, &hw, &opt, top, json, stdout, err, sizeof err);
  } else {
    mt_plan p;
    rc = mt_plan_compute(&cfg, world, &hw, &opt, &p, err, sizeof err);
    if (!rc) mt_plan_print(stdout, &cfg, &hw, &p, json);
  }
  if (rc) fprintf(stderr, "megatrain plan: error: %s\n", err);
  mt_config_free(&cfg);
  return rc;
}
