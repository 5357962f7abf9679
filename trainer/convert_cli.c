/* trainer/convert_cli.c — `megatrain convert` (see trainer/cli.h). Placeholder of the
 * shared interface: replaced by its implementation. */
#include <stdio.h>

#include "trainer/cli.h"

int mt_cli_convert(int argc, char **argv) {
  (void)argc;
  (void)argv;
  fprintf(stderr, "megatrain: error: 'convert' is not implemented yet\n");
  return 2;
}
