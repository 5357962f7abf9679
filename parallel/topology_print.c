/* parallel/topology_print.c — human table and JSON form of a topology
 * (`megatrain topology`). See topology.h. */
#include <cjson/cJSON.h>
#include <stdlib.h>

#include "../core/util.h"
#include "topology.h"

static cJSON *sizes_json(const mt_topology *t) {
  cJSON *s = cJSON_CreateObject();
  cJSON_AddNumberToObject(s, "tensor_model_parallel_size", t->tp);
  cJSON_AddNumberToObject(s, "pipeline_model_parallel_size", t->pp);
  cJSON_AddNumberToObject(s, "data_parallel_size", t->dp);
  cJSON_AddNumberToObject(s, "context_parallel_size", t->cp);
  cJSON_AddNumberToObject(s, "expert_model_parallel_size", t->ep);
  cJSON_AddNumberToObject(s, "expert_tensor_parallel_size", t->etp);
  cJSON_AddNumberToObject(s, "expert_data_parallel_size", t->edp);
  return s;
}

static int print_json(const mt_topology *t, FILE *f) {
  cJSON *root = cJSON_CreateObject();
  cJSON_AddNumberToObject(root, "world", t->world);
  cJSON_AddItemToObject(root, "sizes", sizes_json(t));
  cJSON *groups = cJSON_AddObjectToObject(root, "groups");
  for (int k = 0; k < MT_GK_N; k++) {
    const mt_group_list *l = &t->lists[k];
    cJSON *arr = cJSON_AddArrayToObject(groups, mt_group_kind_name((mt_group_kind)k));
    for (int g = 0; g < l->n_groups; g++)
      cJSON_AddItemToArray(arr, cJSON_CreateIntArray(l->ranks + g * l->group_size, l->group_size));
  }
  cJSON *ranks = cJSON_AddArrayToObject(root, "ranks");
  for (int r = 0; r < t->world; r++) {
    mt_rank_coords c = mt_topology_coords(t, r);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "rank", r);
    cJSON_AddNumberToObject(o, "tp", c.tp);
    cJSON_AddNumberToObject(o, "cp", c.cp);
    cJSON_AddNumberToObject(o, "pp", c.pp);
    cJSON_AddNumberToObject(o, "dp", c.dp);
    cJSON_AddNumberToObject(o, "etp", c.etp);
    cJSON_AddNumberToObject(o, "ep", c.ep);
    cJSON_AddNumberToObject(o, "edp", c.edp);
    cJSON_AddItemToArray(ranks, o);
  }
  char *s = cJSON_Print(root);
  cJSON_Delete(root);
  if (!s) return -1;
  int rc = fprintf(f, "%s\n", s) < 0 ? -1 : 0;
  free(s);
  return rc;
}

static void print_list(FILE *f, const mt_group_list *l) {
  for (int g = 0; g < l->n_groups; g++) {
    fputs(g ? ", [" : "[", f);
    for (int i = 0; i < l->group_size; i++)
      fprintf(f, i ? ",%d" : "%d", l->ranks[g * l->group_size + i]);
    fputc(']', f);
  }
  fputc('\n', f);
}

static int print_table(const mt_topology *t, FILE *f) {
  fprintf(f, "world %d = tp %d x cp %d x dp %d x pp %d; experts: etp %d x ep %d x edp %d x pp %d\n",
          t->world, t->tp, t->cp, t->dp, t->pp, t->etp, t->ep, t->edp, t->pp);
  fprintf(f, "order tp-cp-ep-dp-pp (tp fastest)\n\ngroups:\n");
  for (int k = 0; k < MT_GK_N; k++) {
    const mt_group_list *l = &t->lists[k];
    fprintf(f, "  %-7s %3d x %-3d ", mt_group_kind_name((mt_group_kind)k), l->n_groups,
            l->group_size);
    print_list(f, l);
  }
  fprintf(f, "\n%6s %4s %4s %4s %4s %4s %4s %4s\n", "rank", "tp", "cp", "pp", "dp", "etp", "ep",
          "edp");
  for (int r = 0; r < t->world; r++) {
    mt_rank_coords c = mt_topology_coords(t, r);
    fprintf(f, "%6d %4d %4d %4d %4d %4d %4d %4d\n", r, c.tp, c.cp, c.pp, c.dp, c.etp, c.ep, c.edp);
  }
  return ferror(f) ? -1 : 0;
}

int mt_topology_print(const mt_topology *t, FILE *f, int json) {
  return json ? print_json(t, f) : print_table(t, f);
}
