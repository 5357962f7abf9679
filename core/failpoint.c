/* core/failpoint.c — MEGATRAIN_FAILPOINT parser (core/failpoint.h). */
#include "core/failpoint.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Parse the arguments of one token [p, end) after its name; -1 when malformed. */
static int parse_args(const char *p, const char *end, int64_t *args) {
  int n = 0;
  while (p < end) {
    if (*p != ':' || n == MT_FAILPOINT_MAX_ARGS) return -1;
    p++;
    char *q;
    errno = 0;
    long long v = strtoll(p, &q, 10);
    if (q == p || q > end || errno) return -1;
    if (args) args[n] = (int64_t)v;
    n++;
    p = q;
  }
  return n;
}

int mt_failpoint_parse(const char *spec, const char *name, int64_t args[MT_FAILPOINT_MAX_ARGS]) {
  if (!spec || !name) return -1;
  const size_t nl = strlen(name);
  const char *p = spec;
  while (*p) {
    const char *end = strchr(p, ',');
    if (!end) end = p + strlen(p);
    while (p < end && *p == ' ') p++;
    if ((size_t)(end - p) >= nl && !strncmp(p, name, nl) && (p[nl] == ':' || p + nl == end)) {
      int64_t tmp[MT_FAILPOINT_MAX_ARGS];
      int n = parse_args(p + nl, end, tmp);
      if (n >= 0) {
        if (args) memcpy(args, tmp, (size_t)n * sizeof *tmp);
        return n;
      }
    }
    p = *end ? end + 1 : end;
  }
  return -1;
}

int mt_failpoint_get(const char *name, int64_t args[MT_FAILPOINT_MAX_ARGS]) {
  return mt_failpoint_parse(getenv("MEGATRAIN_FAILPOINT"), name, args);
}

int mt_failpoint_at(const char *name, int64_t a0) {
  int64_t a[MT_FAILPOINT_MAX_ARGS];
  return mt_failpoint_get(name, a) >= 1 && a[0] == a0;
}
