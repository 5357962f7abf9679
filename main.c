/* main.c — the megatrain command line.
 *
 *   megatrain [train] --config FILE [--set section.key=value]...
 *   megatrain preprocess --input FILE --output-prefix P --vocab-file V --merge-file M ...
 *   megatrain topology --config FILE --world-size N [--json]
 *   megatrain plan --config FILE --world-size N --hardware H [--json] [--sweep]
 *   megatrain --help | --version
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/registry.h"
#include "core/util.h"
#include "data/preprocess.h"
#include "parallel/comm.h"
#include "planner/plan.h"
#include "tools/cli.h"
#include "config/config.h"
#include "trainer/train.h"

#define MT_VERSION "0.1.0"

static void usage(FILE *f) {
  fprintf(f,
          "megatrain " MT_VERSION " — Megatron-style GPT training in C\n"
          "\n"
          "usage:\n"
          "  megatrain [train] --config FILE [--set section.key=VALUE]...\n"
          "      train the model described by FILE (JSON; see docs/config.md). Run under\n"
          "      mpirun / srun --mpi=pmix for several ranks. --set overrides one key; VALUE\n"
          "      is parsed as JSON when it parses (numbers, true/false, null, lists), else\n"
          "      taken as a string. Repeatable.\n"
          "  megatrain preprocess --input FILE --output-prefix PREFIX --vocab-file VOCAB\n"
          "      --merge-file MERGES [--json-keys text] [--append-eod] [--workers N]\n"
          "      tokenize text with the GPT-2 BPE into Megatron's .bin/.idx format\n"
          "  megatrain topology --config FILE --world-size N [--json]\n"
          "      print every rank's coordinates and process groups without launching\n"
          "  megatrain plan --config FILE --world-size N --hardware H [--json] [--sweep]\n"
          "      predict memory per rank and iteration time on N GPUs (docs/planner.md)\n"
          "  megatrain convert --to hf --load DIR --output DIR [--dtype bf16|fp32] [--max-shard-size S]\n"
          "  megatrain convert --from hf --input DIR --output DIR --config FILE\n"
          "      export a checkpoint to a Hugging Face model directory, or import one as a\n"
          "      checkpoint at iteration 0 for training.finetune (docs/checkpoint.md)\n"
          "  megatrain convert --upgrade --load OLD --output NEW [--set k=v]...\n"
          "      rewrite a checkpoint of the previous per-layout format in the layout-free\n"
          "      one (run under the layout that wrote it)\n"
          "  megatrain generate --load DIR --prompt TEXT [--max-new-tokens N]\n"
          "      [--temperature T] [--top-k K] [--top-p P] [--seed S]\n"
          "      [--vocab-file F --merge-file M] [--no-kv-cache] [--print-ids] [--num-threads N]\n"
          "      [--dump-logits FILE]   (generate --help: the flags)\n"
          "      continue TEXT with the model of a checkpoint (KV cache; mpirun for tp > 1;\n"
          "      temperature 0 = greedy; tokenizer files default to the config's data.*_file)\n"
          "  megatrain --help | --version\n"
          "\n"
          "exit status: 0 success, 1 runtime/data/checkpoint error, 2 bad config or usage\n");
}

typedef struct {
  const char *config;
  const char **sets;
  int n_sets;
} train_args;

static int parse_train_args(int argc, char **argv, train_args *a) {
  a->sets = calloc((size_t)argc + 1, sizeof(char *));
  for (int i = 0; i < argc; i++) {
    if (!strcmp(argv[i], "--config") && i + 1 < argc) a->config = argv[++i];
    else if (!strncmp(argv[i], "--config=", 9)) a->config = argv[i] + 9;
    else if (!strcmp(argv[i], "--set") && i + 1 < argc) a->sets[a->n_sets++] = argv[++i];
    else if (!strncmp(argv[i], "--set=", 6)) a->sets[a->n_sets++] = argv[i] + 6;
    else if (!strcmp(argv[i], "--config") || !strcmp(argv[i], "--set")) {
      fprintf(stderr, "megatrain: error: %s needs a value (%s)\n", argv[i],
              !strcmp(argv[i], "--config") ? "a JSON config FILE" : "section.key=VALUE");
      return 2;
    } else {
      fprintf(stderr, "megatrain: error: unknown argument '%s' (see megatrain --help)\n", argv[i]);
      return 2;
    }
  }
  if (!a->config) {
    fprintf(stderr, "megatrain: error: --config FILE is required (see megatrain --help)\n");
    return 2;
  }
  return 0;
}

/* Whether no launcher started this process (mpirun, srun, a PMI/PMIx
 * server): then it is one process, whose config is checked before MPI
 * starts (which takes about half a second), so that a bad config fails at
 * once. Under a launcher the check runs after MPI_Init, on every rank, with
 * the real world size, and rank 0 reports. */
static int started_alone(void) {
  static const char *const launcher_env[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK",
                                             "PMI_SIZE", "SLURM_PROCID"};
  for (size_t i = 0; i < sizeof launcher_env / sizeof launcher_env[0]; i++)
    if (getenv(launcher_env[i])) return 0;
  return 1;
}

static int cmd_train(int argc, char **argv) {
  train_args a = {0};
  int rc = parse_train_args(argc, argv, &a);
  if (rc) {
    free(a.sets);
    return rc;
  }
  if (started_alone()) {
    mt_config pre;
    char err[4096];
    rc = mt_config_load(&pre, a.config, a.sets, a.n_sets, 1, err, sizeof err);
    if (!rc && (rc = mt_config_check_trainable(&pre, err, sizeof err))) mt_config_free(&pre);
    if (rc) {
      fprintf(stderr, "megatrain: error: %s\n", err);
      free(a.sets);
      return rc;
    }
    mt_config_free(&pre);
  }
  mt_dist *dist = mt_dist_init(&argc, &argv);
  int rank = mt_dist_rank(dist);
  mt_config cfg;
  char err[4096];
  rc = mt_config_load(&cfg, a.config, a.sets, a.n_sets, mt_dist_size(dist), err, sizeof err);
  free(a.sets);
  if (!rc && (rc = mt_config_check_trainable(&cfg, err, sizeof err))) mt_config_free(&cfg);
  if (rc) {
    if (rank == 0) fprintf(stderr, "megatrain: error: %s\n", err);
    mt_dist_finalize(dist);
    return rc;
  }
  if (mt_dist_check_agree(dist, mt_config_hash(&cfg), "config", err, sizeof err) != 0) {
    fprintf(stderr, "[rank %d] megatrain: error: %s\n", rank, err);
    mt_config_free(&cfg);
    mt_dist_finalize(dist);
    return 2;
  }
  if (rank == 0 && cfg.notes[0]) fprintf(stderr, "megatrain: note: %s\n", cfg.notes);
  /* process-wide side effects (OpenBLAS kernels, thread counts) once, here */
  mt_backends_process_init(
      &(mt_backend_options){.device = cfg.device, .num_threads = cfg.training.num_threads});
  rc = mt_train(&cfg, dist);
  mt_config_free(&cfg);
  if (rc != 0 && mt_dist_size(dist) > 1) mt_abort_job(rc); /* every rank exits non-zero */
  mt_dist_finalize(dist);
  return rc;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  const char *cmd = argv[1];
  if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
    usage(stdout);
    return 0;
  }
  if (!strcmp(cmd, "--version")) {
    printf("megatrain %s\n", MT_VERSION);
    return 0;
  }
  if (!strcmp(cmd, "preprocess")) return mt_preprocess_main(argc - 1, argv + 1);
  if (!strcmp(cmd, "topology")) return mt_cli_topology(argc - 2, argv + 2);
  if (!strcmp(cmd, "plan")) return mt_plan_main(argc - 1, argv + 1);
  if (!strcmp(cmd, "convert")) {
    for (int i = 2; i < argc; i++) /* --upgrade: tools/upgrade_cli.c */
      if (!strcmp(argv[i], "--upgrade")) return mt_cli_upgrade(argc - 2, argv + 2);
    return mt_cli_convert(argc - 2, argv + 2);
  }
  if (!strcmp(cmd, "generate")) return mt_cli_generate(argc - 2, argv + 2);
  if (!strcmp(cmd, "train")) return cmd_train(argc - 2, argv + 2);
  return cmd_train(argc - 1, argv + 1);
}
