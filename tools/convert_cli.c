/* tools/convert_cli.c — `megatrain convert` (see tools/cli.h):
 *   --to hf --load DIR --output DIR [--dtype bf16|fp32] [--max-shard-size SIZE]
 *   --from hf --input DIR --output DIR --config FILE
 * (tools/hf_convert.h). Exit 0, 1 bad input, 2 usage or config. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/safetensors.h"
#include "tools/cli.h"
#include "tools/hf_convert.h"

static int usage(const char *msg) {
  if (msg) fprintf(stderr, "megatrain convert: error: %s\n", msg);
  fprintf(stderr,
          "usage: megatrain convert --to hf --load DIR --output DIR [--dtype bf16|fp32]\n"
          "                         [--max-shard-size SIZE]   (default 5GB)\n"
          "       megatrain convert --from hf --input DIR --output DIR --config FILE\n"
          "       megatrain convert --upgrade --load OLD --output NEW   (under OLD's layout)\n");
  return 2;
}

/* The number of processes the launcher started, from its environment
 * (without initialising MPI): Open MPI, MPICH/Hydra (PMI), PMIx, and srun
 * (SLURM_NTASKS only inside a job step: SLURM_STEP_ID is set by srun, not by
 * sbatch/salloc alone). 1 when none says more. */
static long launcher_world_size(const char **var) {
  static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"};
  for (int i = 0; i < 3; i++) {
    const char *v = getenv(vars[i]);
    if (v && atol(v) > 1) {
      *var = vars[i];
      return atol(v);
    }
  }
  const char *v = getenv("SLURM_NTASKS");
  if (!v) v = getenv("SLURM_NPROCS");
  if (v && getenv("SLURM_STEP_ID") && atol(v) > 1) {
    *var = "SLURM_NTASKS";
    return atol(v);
  }
  return 1;
}

int mt_cli_convert(int argc, char **argv) {
  const char *to = NULL, *from = NULL, *load = NULL, *input = NULL, *output = NULL;
  const char *config = NULL, *dtype = "fp32", *shard = "5GB";
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      usage(NULL);
      return 0;
    }
    const char **slot = !strcmp(a, "--to")               ? &to
                        : !strcmp(a, "--from")           ? &from
                        : !strcmp(a, "--load")           ? &load
                        : !strcmp(a, "--input")          ? &input
                        : !strcmp(a, "--output")         ? &output
                        : !strcmp(a, "--config")         ? &config
                        : !strcmp(a, "--dtype")          ? &dtype
                        : !strcmp(a, "--max-shard-size") ? &shard
                                                         : NULL;
    char msg[300];
    if (!slot) {
      snprintf(msg, sizeof msg, "unknown argument '%s'", a);
      return usage(msg);
    }
    if (i + 1 >= argc) {
      snprintf(msg, sizeof msg, "%s needs a value", a);
      return usage(msg);
    }
    *slot = argv[++i];
  }
  if (!!to == !!from) return usage("give one of --to hf or --from hf");
  if ((to && strcmp(to, "hf")) || (from && strcmp(from, "hf")))
    return usage("the only format is 'hf' (Hugging Face: --to hf / --from hf)");
  if (!output) return usage("--output DIR is required");
  const char *var = NULL;
  long ws = launcher_world_size(&var);
  if (ws > 1) {
    fprintf(stderr, "megatrain convert: error: convert --to hf/--from hf runs in one process; run "
            "it without mpirun/srun (%s is %ld)\n", var, ws);
    return 2;
  }
  char err[2048];
  int rc;
  if (to) {
    if (!load) return usage("--to hf needs --load DIR (a megatrain checkpoint)");
    if (input || config) return usage("--input and --config belong to --from hf");
    if (strcmp(dtype, "fp32") && strcmp(dtype, "bf16"))
      return usage("--dtype must be bf16 or fp32");
    uint64_t max_shard;
    if (mt_st_parse_size(shard, &max_shard) || max_shard == 0)
      return usage("--max-shard-size must be a size such as 5GB, 500MB, 100KB or a byte count");
    rc = mt_hf_export_dir(load, output, !strcmp(dtype, "bf16"), max_shard, err, sizeof err);
  } else {
    if (!input) return usage("--from hf needs --input DIR (a Hugging Face model directory)");
    if (!config) return usage("--from hf needs --config FILE (the megatrain model it becomes)");
    if (load) return usage("--load belongs to --to hf");
    rc = mt_hf_import_dir(input, output, config, err, sizeof err);
  }
  if (rc) fprintf(stderr, "megatrain convert: error: %s\n", err);
  else fprintf(stderr, "megatrain convert: wrote %s\n", output);
  return rc;
}
