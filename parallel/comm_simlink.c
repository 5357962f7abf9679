/* parallel/comm_simlink.c — MEGATRAIN_SIM_LINK: the simulated link's
 * bandwidth and latency per group kind (comm.h, "Simulated link";
 * docs/communication.md). The sleeps are comm.c's and comm_async.c's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm_impl.h"

/* Parse "<GB/s>,<latency us>" at s (up to end) into *l; 0 on success. */
static int parse_pair(const char *s, const char *end, mt_sim_link *l) {
  char buf[96];
  size_t n = (size_t)(end - s);
  if (n == 0 || n >= sizeof buf) return -1;
  memcpy(buf, s, n);
  buf[n] = 0;
  char *p;
  double gbps = strtod(buf, &p);
  if (p == buf || *p != ',' || !(gbps > 0)) return -1;
  char *q;
  double lat = strtod(p + 1, &q);
  if (q == p + 1 || *q || !(lat >= 0)) return -1;
  l->bytes_per_ns = gbps; /* 1 GB/s = 1 byte/ns */
  l->latency_ns = lat * 1e3;
  return 0;
}

void mt_sim_link_parse(mt_dist *d, const char *value) {
  d->n_sim = 0;
  if (!value || !*value) return;
  const char *s = value;
  while (*s) {
    const char *end = strchr(s, ';');
    if (!end) end = s + strlen(s);
    if (d->n_sim == MT_COMM_KINDS)
      mt_fatal("MEGATRAIN_SIM_LINK='%s': more than %d entries", value, MT_COMM_KINDS);
    mt_sim_link *l = &d->sim[d->n_sim];
    memset(l, 0, sizeof *l);
    const char *eq = memchr(s, '=', (size_t)(end - s));
    const char *pair = s;
    if (eq) {
      size_t kn = (size_t)(eq - s);
      if (kn == 0 || kn >= sizeof l->kind)
        mt_fatal("MEGATRAIN_SIM_LINK='%s': expected <kind>=<GB/s>,<latency us> entries "
                 "(kind: a group name such as dp or tp)", value);
      memcpy(l->kind, s, kn);
      pair = eq + 1;
    }
    if (parse_pair(pair, end, l))
      mt_fatal("MEGATRAIN_SIM_LINK='%s': expected <GB/s>,<latency us> (GB/s > 0, latency >= 0) "
               "or ';'-separated <kind>=<GB/s>,<latency us> entries, e.g. 'dp=2,50;tp=100,5'",
               value);
    for (int i = 0; i < d->n_sim; i++)
      if (!strcmp(d->sim[i].kind, l->kind))
        mt_fatal("MEGATRAIN_SIM_LINK='%s': %s given twice", value,
                 l->kind[0] ? l->kind : "the default (an entry without kind)");
    d->n_sim++;
    s = *end ? end + 1 : end;
  }
}

void mt_sim_link_mark(mt_dist *d, const char *kind) {
  for (int i = 0; i < d->n_sim; i++)
    if (!strcmp(d->sim[i].kind, kind)) d->sim[i].used = 1;
  for (int i = 0; i < d->n_seen; i++)
    if (!strcmp(d->seen[i], kind)) return;
  if (d->n_seen < MT_COMM_KINDS) snprintf(d->seen[d->n_seen++], sizeof d->seen[0], "%s", kind);
}

void mt_dist_check_sim_link(const mt_dist *d) {
  for (int i = 0; i < d->n_sim; i++) {
    if (!d->sim[i].kind[0] || d->sim[i].used) continue;
    char names[MT_COMM_KINDS * 34] = "";
    size_t at = 0;
    for (int k = 0; k < d->n_seen && at < sizeof names; k++)
      at += (size_t)snprintf(names + at, sizeof names - at, "%s%s", k ? ", " : "", d->seen[k]);
    mt_fatal("MEGATRAIN_SIM_LINK='%s': no group of this run is named '%s' (its groups: %s)",
             getenv("MEGATRAIN_SIM_LINK") ? getenv("MEGATRAIN_SIM_LINK") : "", d->sim[i].kind,
             names);
  }
}

int mt_sim_link_of(const mt_dist *d, const char *kind, double *bytes_per_ns, double *lat_ns) {
  const mt_sim_link *def = NULL;
  for (int i = 0; i < d->n_sim; i++) {
    if (!d->sim[i].kind[0]) def = &d->sim[i];
    else if (!strcmp(d->sim[i].kind, kind)) def = &d->sim[i], i = d->n_sim;
  }
  if (!def) return 0;
  *bytes_per_ns = def->bytes_per_ns;
  *lat_ns = def->latency_ns;
  return 1;
}
