/* planner/plan_cli.c — `megatrain plan`: argument parsing (the output is
 * planner/plan_print.c).
 *
 *   megatrain plan --config FILE --world-size N --hardware H [--set k=v]...
 *                  [--overlap-grad-reduce] [--overlap-param-gather] [--overlap-p2p-comm]
 *                  [--moe-shared-expert-overlap] [--moe-load-factor X]
 *                  [--moe-recv-rows R [--moe-expert-rows RX]] [--json] [--sweep [--top K]]
 * H is a path or a name under configs/hardware/ (a100-80gb, h100-sxm, h200-sxm).
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
          "  predict per-rank memory and iteration time of the config on N GPUs of type H\n"
          "  (a JSON file, or a name under configs/hardware/: a100-80gb, h100-sxm, h200-sxm).\n"
          "  --sweep ranks every valid layout (tp, pp, v, ep, zero, recompute, micro-batch)\n"
          "  that fits by predicted throughput. See docs/planner.md.\n");
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
