/* tools/topology_cli.c — `megatrain topology` (see cli.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parallel/topology.h"
#include "tools/cli.h"
#include "config/config.h"

int mt_cli_topology(int argc, char **argv) {
  const char *config = NULL;
  int world = 0, json = 0, n_sets = 0;
  const char **sets = calloc((size_t)argc + 1, sizeof(char *));
  for (int i = 0; i < argc; i++) {
    if (!strcmp(argv[i], "--config") && i + 1 < argc) config = argv[++i];
    else if (!strcmp(argv[i], "--world-size") && i + 1 < argc) world = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--json")) json = 1;
    else if (!strcmp(argv[i], "--set") && i + 1 < argc) sets[n_sets++] = argv[++i];
    else {
      fprintf(stderr, "megatrain topology: error: unknown argument '%s'\n", argv[i]);
      free(sets);
      return 2;
    }
  }
  if (!config || world < 1) {
    fprintf(stderr, "megatrain topology: error: --config FILE and --world-size N (N >= 1) are "
                    "required\n");
    free(sets);
    return 2;
  }
  mt_config cfg;
  char err[4096];
  int rc = mt_config_load(&cfg, config, sets, n_sets, world, err, sizeof err);
  free(sets);
  if (rc) {
    fprintf(stderr, "megatrain: error: %s\n", err);
    return rc;
  }
  mt_topology_sizes sz = {
      .tensor_model_parallel_size = cfg.parallel.tensor_model_parallel_size,
      .pipeline_model_parallel_size = cfg.parallel.pipeline_model_parallel_size,
      .expert_model_parallel_size = cfg.parallel.expert_model_parallel_size,
      .expert_tensor_parallel_size = cfg.parallel.expert_tensor_parallel_size,
      .context_parallel_size = cfg.parallel.context_parallel_size};
  mt_topology t;
  if (mt_topology_build(&t, world, &sz, err, sizeof err) != 0) {
    fprintf(stderr, "megatrain: error: %s: %s\n", config, err);
    mt_config_free(&cfg);
    return 2;
  }
  rc = mt_topology_print(&t, stdout, json) ? 1 : 0;
  mt_topology_free(&t);
  mt_config_free(&cfg);
  return rc;
}
