/* tests/tools/preprocess_cli.c — stand-alone `preprocess` subcommand for tests
 * and benchmarks before/without the main binary:
 * preprocess_cli [preprocess options...] (same as `megatrain preprocess ...`). */
#include "data/preprocess.h"

int main(int argc, char **argv) {
  argv[0] = "preprocess";
  return mt_preprocess_main(argc, argv);
}
