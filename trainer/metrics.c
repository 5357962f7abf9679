/* trainer/metrics.c — see metrics.h. */
#include "trainer/metrics.h"

#include "core/fileio.h"
#include "core/json.h"

#include <errno.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "core/util.h"

const mt_timer_def mt_trainer_timer_defs[MT_TM_N] = {
    [MT_TM_FORWARD_BACKWARD] = {"forward-backward", 1},
    [MT_TM_ALL_GRADS_SYNC] = {"all-grads-sync", 1},
    [MT_TM_PARAMS_ALL_GATHER] = {"params-all-gather", 1},
    [MT_TM_OPT_CLIP] = {"optimizer-clip-main-grad", 1},
    [MT_TM_OPT_INNER] = {"optimizer-inner-step", 1},
    [MT_TM_OPTIMIZER] = {"optimizer", 1},
    [MT_TM_BATCH_GENERATOR] = {"batch-generator", 2},
    [MT_TM_FORWARD_COMPUTE] = {"forward-compute", 2},
    [MT_TM_BACKWARD_COMPUTE] = {"backward-compute", 2},
};

void mt_log_line(FILE *f, const mt_log_record *r) {
  char ts[32];
  time_t now = time(NULL);
  struct tm tmv;
  localtime_r(&now, &tmv);
  strftime(ts, sizeof ts, "%Y-%m-%d %H:%M:%S", &tmv);
  fprintf(f,
          " [%s] iteration %8lld/%8lld | consumed samples: %12lld | elapsed time per iteration "
          "(ms): %.1f | tokens/s: %.1f | throughput per device (TFLOP/s/device): %.3f |",
          ts, (long long)r->iteration, (long long)r->train_iters, (long long)r->consumed_samples,
          r->elapsed_ms, r->tokens_per_s, r->tflops_per_device);
  if (r->flops_formula) fprintf(f, " FLOPs formula: %s |", r->flops_formula);
  if (r->mfu >= 0) fprintf(f, " MFU: %.1f%% |", 100.0 * r->mfu);
  fprintf(f, " exposed communication (ms): %.1f of %.1f |", r->exposed_comm_ms, r->comm_ms);
  if (r->n_stages > 0)
    fprintf(f, " pipeline bubble: %.3f (theory (p-1)/(v m) = %.3f) |", r->bubble_slowest,
            r->bubble_theory);
  fprintf(f,
          " learning rate: %.6E | global batch size: %5lld | lm loss: %.6E | grad norm: %.4f |",
          (double)r->lr, (long long)r->global_batch_size, r->lm_loss, r->grad_norm);
  for (int k = 0; k < r->n_mtp; k++) fprintf(f, " mtp_%d loss: %.6E |", k + 1, r->mtp_loss[k]);
  if (r->n_moe_layers > 0) {
    fprintf(f, " load balancing loss: %.6E | z loss: %.6E | dropped: %.4f | tokens per expert max/mean:",
            r->load_balancing_loss, r->z_loss, r->dropped_fraction);
    for (int l = 0; l < r->n_moe_layers && l < 64; l++)
      fprintf(f, "%s%.0f/%.0f", l ? " " : " ", r->tokens_per_expert_max[l],
              r->tokens_per_expert_mean[l]);
    fprintf(f, " |");
  }
  fprintf(f, " number of skipped iterations: %3lld | number of nan iterations: %3lld | ETA: %.0f s |",
          (long long)r->skipped_iters, (long long)r->nan_iters, r->eta_s);
  if (r->has_straggler)
    fprintf(f, " straggler: slowest rank %d %.1f ms, fastest rank %d %.1f ms |",
            r->straggler_max_rank, r->straggler_max_ms, r->straggler_min_rank, r->straggler_min_ms);
  fputc('\n', f);
  fflush(f);
}

/* Keep the records of iterations <= last in the file at path. */
static void keep_until(const char *path, int64_t last) {
  FILE *in = fopen(path, "r");
  if (!in) return;
  char tmp[4200];
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  FILE *out = fopen(tmp, "w");
  if (!out) {
    fclose(in);
    return;
  }
  char *line = NULL;
  size_t cap = 0;
  while (getline(&line, &cap, in) > 0) {
    char e[8];
    cJSON *o = mt_json_parse(line, strlen(line), 0, "", e, sizeof e); /* a torn line: dropped */
    const cJSON *it = o ? cJSON_GetObjectItemCaseSensitive(o, "iteration") : NULL;
    if (cJSON_IsNumber(it) && it->valuedouble <= (double)last) fputs(line, out);
    cJSON_Delete(o);
  }
  free(line);
  fclose(in);
  if (fclose(out) == 0) rename(tmp, path);
}

int mt_metrics_open(mt_metrics_file *mf, const char *path, int64_t resume_iteration, char *err,
                    size_t errlen) {
  mf->f = NULL;
  if (!path || !path[0]) return 0;
  char dir[4096];
  snprintf(dir, sizeof dir, "%s", path);
  char *slash = strrchr(dir, '/');
  if (slash) {
    *slash = '\0';
    if (dir[0] && mt_mkdirs(dir) != 0) {
      snprintf(err, errlen, "cannot create directory '%s' for logging.metrics_file: %s", dir,
               strerror(errno));
      return -1;
    }
  }
  if (resume_iteration > 0) keep_until(path, resume_iteration);
  mf->f = fopen(path, resume_iteration > 0 ? "a" : "w");
  if (!mf->f) {
    snprintf(err, errlen, "cannot open logging.metrics_file '%s': %s", path, strerror(errno));
    return -1;
  }
  return 0;
}

static void emit(mt_metrics_file *mf, cJSON *o) {
  char *s = cJSON_PrintUnformatted(o);
  fputs(s, mf->f);
  fputc('\n', mf->f);
  fflush(mf->f);
  cJSON_free(s);
  cJSON_Delete(o);
}

void mt_metrics_write(mt_metrics_file *mf, const mt_log_record *r, double val_loss) {
  if (!mf->f) return;
  cJSON *o = cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "iteration", (double)r->iteration);
  cJSON_AddNumberToObject(o, "consumed_samples", (double)r->consumed_samples);
  cJSON_AddNumberToObject(o, "lm_loss", r->lm_loss);
  cJSON_AddNumberToObject(o, "grad_norm", r->grad_norm);
  if (r->n_mtp > 0) { /* per depth, the iteration's value */
    cJSON *l = cJSON_AddArrayToObject(o, "mtp_loss");
    for (int k = 0; k < r->n_mtp; k++) cJSON_AddItemToArray(l, cJSON_CreateNumber(r->mtp_loss[k]));
  }
  cJSON_AddNumberToObject(o, "lr", r->lr);
  cJSON_AddNumberToObject(o, "weight_decay", r->weight_decay);
  cJSON_AddNumberToObject(o, "lr_applied", r->lr_applied);
  cJSON_AddNumberToObject(o, "weight_decay_applied", r->wd_applied);
  cJSON_AddNumberToObject(o, "global_batch_size", (double)r->global_batch_size);
  cJSON_AddNumberToObject(o, "elapsed_ms", r->elapsed_ms);
  cJSON_AddNumberToObject(o, "tokens_per_s", r->tokens_per_s);
  cJSON_AddNumberToObject(o, "tflops_per_device", r->tflops_per_device);
  if (r->flops_formula) cJSON_AddStringToObject(o, "flops_formula", r->flops_formula);
  if (r->mfu >= 0) cJSON_AddNumberToObject(o, "mfu", r->mfu);
  cJSON_AddNumberToObject(o, "skipped_iterations", (double)r->skipped_iters);
  cJSON_AddNumberToObject(o, "nan_iterations", (double)r->nan_iters);
  if (r->n_moe_layers > 0) {
    int n = r->n_moe_layers < 64 ? r->n_moe_layers : 64;
    cJSON_AddNumberToObject(o, "load_balancing_loss", r->load_balancing_loss);
    cJSON_AddNumberToObject(o, "z_loss", r->z_loss);
    cJSON_AddNumberToObject(o, "dropped_fraction", r->dropped_fraction);
    cJSON_AddNumberToObject(o, "dropped_tokens", (double)r->dropped_tokens);
    cJSON *mx = cJSON_AddArrayToObject(o, "tokens_per_expert_max");
    cJSON *mn = cJSON_AddArrayToObject(o, "tokens_per_expert_mean");
    for (int l = 0; l < n; l++) {
      cJSON_AddItemToArray(mx, cJSON_CreateNumber(r->tokens_per_expert_max[l]));
      cJSON_AddItemToArray(mn, cJSON_CreateNumber(r->tokens_per_expert_mean[l]));
    }
  }
  if (r->moe_list_layers > 0 && r->tokens_per_expert) {
    /* doubles print round-trip exact (cJSON: %.17g when %.15g does not) */
    cJSON *tpe = cJSON_AddArrayToObject(o, "tokens_per_expert");
    cJSON *eb = r->expert_bias ? cJSON_AddArrayToObject(o, "expert_bias") : NULL;
    for (int l = 0; l < r->moe_list_layers; l++) {
      cJSON *a = cJSON_CreateArray(), *b = eb ? cJSON_CreateArray() : NULL;
      for (int e = 0; e < r->moe_E; e++) {
        size_t i = (size_t)l * r->moe_E + e;
        cJSON_AddItemToArray(a, cJSON_CreateNumber((double)r->tokens_per_expert[i]));
        if (b) cJSON_AddItemToArray(b, cJSON_CreateNumber((double)r->expert_bias[i]));
      }
      cJSON_AddItemToArray(tpe, a);
      if (b) cJSON_AddItemToArray(eb, b);
    }
  }
  if (r->n_comm > 0) {
    cJSON *cb = cJSON_AddObjectToObject(o, "comm_bytes");
    for (int i = 0; i < r->n_comm; i++)
      cJSON_AddNumberToObject(cb, r->comm_group[i], (double)r->comm_bytes[i]);
  }
  cJSON_AddNumberToObject(o, "comm_ms", r->comm_ms);
  cJSON_AddNumberToObject(o, "exposed_comm_ms", r->exposed_comm_ms);
  if (r->n_comm_time > 0) {
    cJSON *a = cJSON_AddObjectToObject(o, "comm_ms_by_group");
    cJSON *b = cJSON_AddObjectToObject(o, "exposed_comm_ms_by_group");
    for (int i = 0; i < r->n_comm_time; i++) {
      cJSON_AddNumberToObject(a, r->comm_time_group[i], r->comm_time_ms[i]);
      cJSON_AddNumberToObject(b, r->comm_time_group[i], r->exposed_time_ms[i]);
    }
  }
  if (r->n_stages > 0) {
    cJSON *b = cJSON_AddArrayToObject(o, "pp_bubble");
    for (int i = 0; i < r->n_stages; i++) cJSON_AddItemToArray(b, cJSON_CreateNumber(r->bubble[i]));
    cJSON_AddNumberToObject(o, "pp_bubble_theory", r->bubble_theory);
    cJSON_AddNumberToObject(o, "pp_bubble_busiest_stage", r->bubble_slowest);
  }
  if (r->has_straggler) {
    cJSON_AddNumberToObject(o, "straggler_max_ms", r->straggler_max_ms);
    cJSON_AddNumberToObject(o, "straggler_max_rank", r->straggler_max_rank);
    cJSON_AddNumberToObject(o, "straggler_min_ms", r->straggler_min_ms);
    cJSON_AddNumberToObject(o, "straggler_min_rank", r->straggler_min_rank);
  }
  if (val_loss >= 0) cJSON_AddNumberToObject(o, "val_loss", val_loss);
  emit(mf, o);
}

void mt_metrics_close(mt_metrics_file *mf) {
  if (mf->f) fclose(mf->f);
  mf->f = NULL;
}

/* a scalar at the iteration and the same "vs samples" at the sample count */
static void tb_pair(mt_tb_writer *tb, const char *tag, double v, const mt_log_record *r) {
  char vs[96];
  snprintf(vs, sizeof vs, "%s vs samples", tag);
  mt_tb_scalar(tb, tag, v, r->iteration);
  mt_tb_scalar(tb, vs, v, r->consumed_samples);
}

void mt_tb_iteration(mt_tb_writer *tb, const mt_log_record *r, double mem_bytes,
                     double mem_peak) {
  if (!tb || !tb->f) return;
  tb_pair(tb, "learning-rate", r->lr, r);
  tb_pair(tb, "batch-size", (double)r->global_batch_size, r);
  tb_pair(tb, "lm loss", r->lm_loss, r);
  tb_pair(tb, "grad-norm", r->grad_norm, r);
  if (mem_bytes >= 0) {
    mt_tb_scalar(tb, "mem-allocated-bytes", mem_bytes, r->iteration);
    mt_tb_scalar(tb, "mem-max-allocated-bytes", mem_peak, r->iteration);
  }
  mt_tb_flush(tb);
}

void mt_log_timers(mt_timers *ts, mt_group *world, int print, const char *option,
                   mt_tb_writer *tb, int tb_timers, const mt_log_record *line, double n_iv) {
  const int tb_on = tb && tb->f && tb_timers;
  if (tb_on) {
    mt_tb_scalar(tb, "iteration-time", line->elapsed_ms / 1e3, line->iteration);
    mt_tb_scalar(tb, "throughput", line->tflops_per_device, line->iteration);
  }
  if (ts->log_level > 0) {
    const int world_n = mt_group_size(world);
    double *all = mt_xcalloc((size_t)world_n * MT_TM_N, sizeof(double));
    mt_allgather(world, ts->elapsed, all, MT_TM_N, MT_F64);
    if (print) mt_timers_print(stdout, ts, all, world_n, option, n_iv);
    for (int id = 0; tb_on && id < MT_TM_N; id++) {
      if (!mt_timer_on(ts, id)) continue;
      char tag[96];
      snprintf(tag, sizeof tag, "%s-time", ts->def[id].name);
      double v = mt_timers_max(ts, all, world_n, id, n_iv);
      if (v > 0) mt_tb_scalar(tb, tag, v, line->iteration);
    }
    free(all);
  }
  mt_timers_reset(ts);
  mt_tb_flush(tb);
}
