/* tests/tools/gen_config_doc.c — writes docs/config.md to stdout from the
 * template docs/config.md.in and the config key table (tests/support/config_doc.h).
 * Usage: gen_config_doc TEMPLATE > docs/config.md (what `make docs` runs;
 * tests/integration/test_config_doc.sh checks the committed page is current).
 * Exit status 0, or 1 with a message on stderr. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/config_doc.h"
#include "core/fileio.h"

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s TEMPLATE > OUT\n", argv[0]);
    return 1;
  }
  size_t len = 0;
  int err_no = 0;
  char *tmpl = mt_read_file(argv[1], 0, &len, &err_no);
  if (!tmpl) {
    fprintf(stderr, "gen_config_doc: cannot read %s: %s\n", argv[1], strerror(err_no));
    return 1;
  }
  char err[512] = "";
  int rc = mt_config_doc_render(tmpl, stdout, err, sizeof err);
  free(tmpl);
  if (rc) fprintf(stderr, "gen_config_doc: %s: %s\n", argv[1], err);
  if (fflush(stdout) != 0) rc = 1;
  return rc;
}
