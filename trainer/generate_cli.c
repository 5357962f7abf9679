/* trainer/generate_cli.c — `megatrain generate` (see trainer/cli.h). Placeholder of the
 * shared interface: replaced by its implementation. */
#include <stdio.h>

#include "trainer/cli.h"

int mt_cli_generate(int argc, char **argv) {
  (void)argc;
  (void)argv;
  fprintf(stderr, "megatrain: error: 'generate' is not implemented yet\n");
  return 2;
}
