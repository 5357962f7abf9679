/* trainer/train_checkpoint.c — glue between the trainer and the layout-free
 * checkpoint (checkpoint/dist_checkpoint.h): the training state as views
 * (checkpoint/views.h), the scalars saved with it, loading under any
 * layout, training.finetune, and the previous per-layout format
 * (checkpoint/legacy_format.h), which still loads under the layout that wrote it. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <dirent.h>

#include "core/util.h"
#include "checkpoint/legacy_reader.h"
#include "checkpoint/legacy_zero.h"
#include "checkpoint/async_writer.h"
#include "checkpoint/lock.h"
#include "checkpoint/views.h"
#include "checkpoint/dist_checkpoint.h"
#include "checkpoint/fp8_meta.h"
#include "trainer/resume_checks.h"
#include "trainer/train_internal.h"

#define PFX_OPT "optimizer.state."
#define PFX_FP32 "optimizer.state.fp32_param."

/* Agree on an error over the world: returns 1 when any rank failed, and
 * then every rank's err holds the message of the lowest failing rank. */
static int agree_err(mt_group *world, int failed, char *err, size_t errlen) {
  if (!world || mt_group_size(world) < 2) return failed != 0;
  const int n = mt_group_size(world), me = mt_group_rank(world);
  int32_t who = failed ? n - me : 0;
  mt_allreduce(world, &who, 1, MT_I32, MT_OP_MAX);
  if (who == 0) return 0;
  int32_t msg[512]; /* 2048 bytes, as dist_checkpoint_save.c */
  memset(msg, 0, sizeof msg);
  if (n - who == me) snprintf((char *)msg, sizeof msg, "%s", err);
  mt_broadcast(world, msg, 512, MT_I32, n - who);
  ((char *)msg)[sizeof msg - 1] = '\0';
  snprintf(err, errlen, "%s", (const char *)msg);
  return 1;
}

/* ---------- the previous per-layout format (load only) ---------- */

static mt_ckpt_layout legacy_layout(const mt_trainer *t) {
  mt_ckpt_layout L = {0};
  L.tp_rank = t->ps->tp_rank;
  L.pp_rank = t->ps->pp_rank;
  L.pp_size = t->cfg->parallel.pipeline_model_parallel_size;
  L.writer = t->ps->dp_cp_rank == 0;
  L.world = t->world;
  if (t->zero) {
    L.shard_load = mt_zero_ckpt_load;
    L.shard_ctx = t->zero;
  }
  return L;
}

static int load_legacy(mt_trainer *t, mt_ckpt_state *st, char *err, size_t errlen) {
  mt_ckpt_layout L = legacy_layout(t);
  mt_ckpt_buffer *bufs = NULL;
  L.n_buffers = mt_trainer_moe_ckpt_buffers(t, &bufs);
  L.buffers = bufs;
  int rc = mt_checkpoint_load(t->cfg->checkpoint.load, st, &t->opt, &L, err, errlen);
  free(bufs);
  if (rc != 0) {
    size_t l = strlen(err);
    /* a damaged file (or another rank's failure) is not a layout question */
    const int damaged = strstr(err, "checksum mismatch") || strstr(err, "short read") ||
                        strstr(err, "failed on another rank");
    snprintf(err + l, errlen - l, "%s",
             damaged ? " (a checkpoint in megatrain's previous per-layout format)"
                     : " (this checkpoint is in megatrain's previous per-layout format, which "
                       "loads only under the tp, pp, zero_stage and data-parallel layout that "
                       "wrote it)");
    return -1;
  }
  if (t->zero) mt_zero_opt_sync_params(t->zero);
  mt_trainer_moe_bias_after_load(t);
  return 0;
}

/* ---------- views of the training state ---------- */

/* This rank's views: parameters, optimizer state when `optim`, buffers.
 * saving sets the write flags (ckpt_views.h rules). */
static int trainer_views(mt_trainer *t, int saving, int optim, mt_dckpt_view **v) {
  const int64_t V = mt_gpt_get_config(t->model)->model.vocab_size;
  int n = 0;
  *v = NULL;
  if (t->zero) {
    mt_ckpt_zero_views(t->zero, V, 1, optim, saving, v, &n);
  } else {
    const int wd = saving && t->ps->dp_cp_rank == 0, we = saving && t->ps->edp_rank == 0;
    mt_ckpt_model_param_views(t->model, V, wd, we, v, &n);
    if (optim) mt_ckpt_adamw_views(t->model, &t->opt, V, wd, we, v, &n);
  }
  mt_ckpt_buffer *bufs = NULL;
  int nb = mt_trainer_moe_ckpt_buffers(t, &bufs);
  mt_ckpt_buffer_views(bufs, nb, saving && t->ps->tp_rank == 0 && t->ps->dp_cp_rank == 0, v, &n);
  free(bufs);
  nb = mt_ckpt_fp8_buffers(t->model, 0, &bufs); /* reduced over tp, cp (dp): one global value */
  mt_ckpt_buffer_views(bufs, nb, saving && t->ps->tp_rank == 0 && t->ps->dp_cp_rank == 0, v, &n);
  free(bufs);
  nb = mt_ckpt_fp8_buffers(t->model, 1, &bufs); /* experts': over etp (edp) */
  mt_ckpt_buffer_views(bufs, nb, saving && t->ps->etp_rank == 0 && t->ps->edp_rank == 0, v, &n);
  free(bufs);
  return n;
}

static int64_t dir_bytes(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return 0;
  int64_t sum = 0;
  struct dirent *e;
  char path[4600];
  struct stat sb;
  while ((e = readdir(d))) {
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    if (stat(path, &sb) == 0 && S_ISREG(sb.st_mode)) sum += (int64_t)sb.st_size;
  }
  closedir(d);
  return sum;
}

static void print_saved(const mt_trainer *t, int64_t iteration, const char *how) {
  if (t->rank != 0) return;
  char dir[4200];
  snprintf(dir, sizeof dir, "%s/iter_%07lld", t->cfg->checkpoint.save, (long long)iteration);
  printf(" saved checkpoint at iteration %lld to %s %s (%.1f MiB)\n", (long long)iteration,
         t->cfg->checkpoint.save, how, (double)dir_bytes(dir) / (1024.0 * 1024.0));
  fflush(stdout);
}

/* After a failed save of iteration `it`: say what is left (every rank holds
 * the same message; the lock keeps other writers out, so "latest" is ours).
 * rc MT_DCKPT_UNREFERENCED: the iteration is on disk, the message already
 * says so and what "latest" names. */
static void explain_failed_save(const mt_trainer *t, int64_t it, int rc, char *err,
                                size_t errlen) {
  if (rc == MT_DCKPT_UNREFERENCED) return;
  const int64_t latest = mt_dckpt_latest(t->cfg->checkpoint.save);
  size_t l = strlen(err);
  if (latest >= 0)
    snprintf(err + l, errlen - l,
             " (the checkpoint of iteration %lld was not saved; '%s' still holds iteration %lld "
             "as latest)", (long long)it, t->cfg->checkpoint.save, (long long)latest);
  else
    snprintf(err + l, errlen - l,
             " (the checkpoint of iteration %lld was not saved; '%s' holds no earlier checkpoint)",
             (long long)it, t->cfg->checkpoint.save);
}

int mt_trainer_save_poll(mt_trainer *t, int wait, char *err, size_t errlen) {
  int64_t it = 0;
  double write_s;
  err[0] = '\0';
  int rc = mt_ckpt_async_poll(t->ckpt_async, t->world, wait, &it, &write_s, err, errlen);
  if (rc < 0) {
    explain_failed_save(t, it, rc, err, errlen);
    return -1;
  }
  if (rc == 1) {
    char how[96];
    snprintf(how, sizeof how, "(asynchronous: written in %.2f s in the background)", write_s);
    print_saved(t, it, how);
  }
  return 0;
}

void mt_trainer_async_init(mt_trainer *t) {
  t->ckpt_async = mt_ckpt_async_create();
  mt_dckpt_view *v = NULL;
  int n = trainer_views(t, 1, 1, &v);
  mt_ckpt_async_reserve(t->ckpt_async, v, n);
  free(v);
}

/* Rank 0's check that this run still owns checkpoint.save (the lock it
 * took at start-up is the one on disk; checkpoint/lock.h), agreed over the
 * world. Collective. */
static int still_owner(mt_trainer *t, char *err, size_t errlen) {
  const int failed = mt_ckpt_lock_verify(t->ckpt_lock, err, errlen) != 0;
  return agree_err(t->world, failed, err, errlen) ? -1 : 0;
}

/* The guard of mt_dckpt_save_set_guard: the same check right before the
 * save is published (rank 0). */
static int owner_guard(void *ctx, char *err, size_t errlen) {
  return mt_ckpt_lock_verify(ctx, err, errlen);
}

int mt_trainer_save(mt_trainer *t, char *err, size_t errlen) {
  mt_trainer_params_wait(t); /* overlap_param_gather: the step's parameters */
  const double t0 = mt_now();
  mt_dckpt_meta meta = {.iteration = t->iteration,
                        .consumed_samples = t->consumed_samples,
                        .step = t->zero ? t->zero->step : t->opt.step,
                        .skipped_iters = t->skipped_iters,
                        .nan_iters = t->nan_iters,
                        .seed = t->cfg->training.seed,
                        .vocab_size = mt_gpt_get_config(t->model)->model.vocab_size,
                        .has_optimizer = 1};
  mt_resume_sched_fill(&meta.sched, &t->sched, t->sched_steps, &t->cfg->training,
                       mt_batch_rampup_gbs(&t->rampup, t->consumed_samples));
  err[0] = '\0';
  /* a run that no longer owns the directory writes nothing into it */
  if (still_owner(t, err, errlen) != 0) return -1;
  mt_dckpt_view *v = NULL;
  int n = trainer_views(t, 1, 1, &v);
  int rc;
  if (t->ckpt_async) {
    /* a new save waits for the previous one */
    rc = mt_trainer_save_poll(t, 1, err, errlen);
    const double t1 = mt_now();
    if (rc == 0)
      rc = mt_ckpt_async_start(t->ckpt_async, t->cfg->checkpoint.save, &meta, t->cfg->json, t->be,
                               v, n, t->world, t->ckpt_lock ? owner_guard : NULL, t->ckpt_lock,
                               err, errlen);
    if (rc == 0 && t->rank == 0) {
      printf(" started asynchronous save of iteration %lld to %s (waited %.2f s for the previous "
             "save, host snapshot in %.2f s)\n",
             (long long)t->iteration, t->cfg->checkpoint.save, t1 - t0, mt_now() - t1);
      fflush(stdout);
    }
    free(v);
    return rc;
  }
  mt_dckpt_pending *p = NULL;
  rc = mt_dckpt_save_begin(t->cfg->checkpoint.save, &meta, t->cfg->json, v, n, t->world, &p, err,
                           errlen);
  if (rc == 0) {
    if (t->ckpt_lock) mt_dckpt_save_set_guard(p, owner_guard, t->ckpt_lock);
    mt_dckpt_save_write(p, t->world ? mt_group_rank(t->world) : 0, t->be, v, n);
    rc = mt_dckpt_save_finish(p, t->world, err, errlen);
  }
  free(v);
  if (rc != 0) {
    explain_failed_save(t, t->iteration, rc, err, errlen);
    return -1;
  }
  char how[64];
  snprintf(how, sizeof how, "in %.2f s", mt_now() - t0);
  print_saved(t, t->iteration, how);
  return 0;
}

/* ---------- loading ---------- */

/* Zero moments and step; fp32 master copies re-derived from the parameters
 * (training.finetune: fresh optimizer on loaded weights). */
static void reset_optimizer(mt_trainer *t) {
  mt_backend *be = t->be;
  if (!t->zero) {
    mt_adamw *o = &t->opt;
    be->ops->memset0(be, o->m, (size_t)o->numel * sizeof(float));
    be->ops->memset0(be, o->v, (size_t)o->numel * sizeof(float));
    if ((void *)o->master != o->param_buf)
      be->ops->cast(be, o->master, MT_F32, o->param_buf, be->dtype, o->numel);
    o->step = 0;
    return;
  }
  mt_zero_opt *z = t->zero;
  for (int k = 0; k < z->n_part; k++) {
    mt_zero_part *P = &z->part[k];
    const int64_t sn = P->L.shard_numel;
    be->ops->memset0(be, P->m, (size_t)sn * sizeof(float));
    be->ops->memset0(be, P->v, (size_t)sn * sizeof(float));
    if (!P->master) continue;
    if (z->o.stage == 3) {
      be->ops->cast(be, P->master, MT_F32, P->param_shard, be->dtype, sn);
    } else {
      void *tmp = be->ops->alloc(be, (size_t)sn * mt_dtype_size(be->dtype) + 1, MT_MEM_COMM);
      mt_zero_flat_to_shard(be, &P->L, mt_gpt_param_buffer(z->model), tmp, be->dtype);
      be->ops->cast(be, P->master, MT_F32, tmp, be->dtype, sn);
      be->ops->free(be, tmp);
    }
  }
  z->step = 0;
}

/* Point the views at the stored tensors they load from: a parameter held in
 * fp32 reads the fp32 master copy when the checkpoint has one; an fp32
 * master reads the parameter when the checkpoint has no master (saved in
 * fp32). With finetune, optimizer state is dropped and masters read the
 * parameters (re-derived). Buffers absent from a finetune source are
 * dropped. Returns the number of views kept. */
static int resolve_views(mt_dckpt *c, mt_dckpt_view *v, int n, int finetune) {
  int k = 0;
  char alt[MT_DCKPT_NAME_MAX];
  for (int i = 0; i < n; i++) {
    mt_dckpt_view x = v[i];
    const int is_opt = !strncmp(x.name, PFX_OPT, strlen(PFX_OPT));
    const int is_master = !strncmp(x.name, PFX_FP32, strlen(PFX_FP32));
    if (is_opt && !is_master && finetune) continue;
    if (is_master && (finetune || mt_dckpt_find(c, x.name) < 0)) {
      memmove(x.name, x.name + strlen(PFX_FP32), strlen(x.name + strlen(PFX_FP32)) + 1);
    } else if (!is_opt && x.dtype == MT_F32 && !finetune) {
      snprintf(alt, sizeof alt, PFX_FP32 "%.*s", (int)(sizeof alt - sizeof PFX_FP32), x.name);
      if (mt_dckpt_find(c, alt) >= 0) snprintf(x.name, sizeof x.name, "%s", alt);
    }
    if (x.host && finetune && mt_dckpt_find(c, x.name) < 0) continue;
    v[k++] = x;
  }
  return k;
}

/* Name of the base parameter of a stored tensor (optimizer prefixes removed). */
static const char *base_name(const char *name) {
  static const char *pfx[] = {"optimizer.state.exp_avg_sq.", "optimizer.state.exp_avg.",
                              PFX_FP32};
  for (int i = 0; i < 3; i++)
    if (!strncmp(name, pfx[i], strlen(pfx[i]))) return name + strlen(pfx[i]);
  return name;
}

/* A checkpoint tensor that no rank loaded, unless the model has its
 * parameter and only a form it does not need (optimizer state under
 * finetune, a master or the parameter it replaced) went unused: the model
 * built from the config has no tensor of that name. Collective over the
 * world. */
static int check_unused(mt_trainer *t, mt_dckpt *c, char *err, size_t errlen) {
  const int nt = mt_dckpt_n_tensors(c);
  if (nt <= 0) return 0;
  int32_t *used = mt_xcalloc((size_t)nt, sizeof *used);
  for (int i = 0; i < nt; i++) used[i] = mt_dckpt_tensor_used(c, i) != 0;
  if (t->world) mt_allreduce(t->world, used, nt, MT_I32, MT_OP_MAX);
  int bad = -1;
  for (int i = 0; i < nt && bad < 0; i++) {
    if (used[i]) continue;
    const char *b = base_name(mt_dckpt_tensor_name(c, i));
    int ok = mt_ckpt_fp8_is_meta(b); /* FP8 state a run without it ignores (fp8_meta.h) */
    for (int j = 0; j < nt && !ok; j++)
      ok = used[j] && !strcmp(base_name(mt_dckpt_tensor_name(c, j)), b);
    if (!ok) bad = i;
  }
  free(used);
  if (bad < 0) return 0;
  int64_t r, co;
  mt_dtype dt;
  mt_dckpt_tensor_shape(c, bad, &r, &co, &dt);
  snprintf(err, errlen,
           "checkpoint '%s' holds tensor '%s' [%lld, %lld] that no rank loaded: the model built "
           "from the config has no tensor of that name",
           mt_dckpt_dir(c), mt_dckpt_tensor_name(c, bad), (long long)r, (long long)co);
  return -1;
}

/* Load the layout-free checkpoint c into every view of this rank. Collective
 * over the world (agreement, unused tensors, ZeRO-1/2 parameter all-gather). */
static int load_dist(mt_trainer *t, mt_dckpt *c, int finetune, char *err, size_t errlen) {
  const mt_dckpt_meta *meta = mt_dckpt_meta_of(c);
  int failed = 0;
  if (!meta->has_optimizer && !finetune) {
    snprintf(err, errlen,
             "checkpoint '%s' holds model weights only (no optimizer state, e.g. written by "
             "megatrain convert --from hf): set training.finetune: true to train from it",
             mt_dckpt_dir(c));
    failed = 1;
  }
  if (agree_err(t->world, failed, err, errlen)) return -1;
  mt_dckpt_view *v = NULL;
  int n = trainer_views(t, 0, !finetune, &v);
  n = resolve_views(c, v, n, finetune);
  int32_t fresh = 0;
  n = mt_ckpt_fp8_resolve(c, v, n, &fresh, err, errlen);
  failed = n < 0 || mt_dckpt_load(c, t->be, v, n, err, errlen) != 0;
  free(v);
  if (agree_err(t->world, failed, err, errlen)) return -1;
  if (t->world) mt_allreduce(t->world, &fresh, 1, MT_I32, MT_OP_SUM);
  if (fresh && t->rank == 0)
    printf("> checkpoint '%s' holds no FP8 delayed-scaling state (amax histories, scales): "
           "they start empty, as Transformer Engine initialises them\n", mt_dckpt_dir(c));
  failed = check_unused(t, c, err, errlen) != 0; /* identical result on every rank */
  if (failed) return -1;
  if (t->zero) mt_zero_opt_sync_params(t->zero);
  mt_trainer_moe_bias_after_load(t);
  return 0;
}

static int load_checkpoint(mt_trainer *t, int *agreed, char *err, size_t errlen) {
  const mt_config *cfg = t->cfg;
  *agreed = 1;
  if (!cfg->checkpoint.load[0]) {
    if (cfg->checkpoint.save[0] && t->rank == 0) {
      int64_t old = mt_dckpt_latest(cfg->checkpoint.save);
      if (old > 0)
        fprintf(stderr,
                "megatrain: warning: checkpoint.save '%s' already holds iteration %lld and "
                "checkpoint.load is not set: this run starts from scratch and its checkpoints "
                "will replace 'latest' (set checkpoint.load to resume)\n",
                cfg->checkpoint.save, (long long)old);
    }
    return 0;
  }
  const double t0 = mt_now();
  const int finetune = cfg->training.finetune;
  mt_dckpt *c = NULL;
  int rc = mt_dckpt_open(cfg->checkpoint.load, -1, &c, err, errlen);
  if (agree_err(t->world, rc < 0, err, errlen)) {
    if (c) mt_dckpt_close(c);
    return -1;
  }
  int32_t legacy = rc == 1, any_legacy = legacy;
  if (t->world) mt_allreduce(t->world, &any_legacy, 1, MT_I32, MT_OP_MAX);
  mt_ckpt_state st = {0};
  int64_t step = 0;
  mt_ckpt_sched sched_state = {0}; /* opt_param_scheduler (present 0: none) */
  if (any_legacy) {
    if (!legacy) snprintf(err, errlen, "ranks disagree on the checkpoint format of '%s'",
                          cfg->checkpoint.load);
    if (agree_err(t->world, !legacy, err, errlen)) {
      if (c) mt_dckpt_close(c);
      return -1;
    }
    if (load_legacy(t, &st, err, errlen) != 0) {
      *agreed = 0; /* each rank names what it found */
      return -1;
    }
    step = t->zero ? t->zero->step : t->opt.step;
  } else {
    if (load_dist(t, c, finetune, err, errlen) != 0) {
      mt_dckpt_close(c);
      return -1;
    }
    const mt_dckpt_meta *m = mt_dckpt_meta_of(c);
    st.iteration = m->iteration;
    st.consumed_samples = m->consumed_samples;
    st.skipped_iters = m->skipped_iters;
    st.nan_iters = m->nan_iters;
    st.seed = m->seed;
    step = m->step;
    sched_state = m->sched;
  }
  char *saved_cfg = NULL;
  rc = 0;
  if (!any_legacy && c) saved_cfg = mt_xstrdup(mt_dckpt_config_json(c));
  else rc = mt_resume_legacy_config(cfg->checkpoint.load, st.iteration, &saved_cfg, err, errlen);
  if (c) mt_dckpt_close(c);
  /* same metadata on every rank: the same outcome everywhere */
  if (rc == 0) rc = mt_resume_check_model(saved_cfg, cfg, cfg->checkpoint.load, err, errlen);
  if (rc == 0 && !finetune) {
    float wd = t->zero ? t->zero->o.weight_decay : t->opt.weight_decay;
    rc = mt_resume_check_schedule(saved_cfg, cfg, cfg->checkpoint.load, t->rank == 0, &t->sched,
                                  &wd, err, errlen);
    if (t->zero) t->zero->o.weight_decay = wd; /* the checkpoint's, with use_checkpoint_... */
    else t->opt.weight_decay = wd;
    if (rc == 0 && sched_state.present)
      rc = mt_resume_check_sched_state(&sched_state, saved_cfg, cfg, cfg->checkpoint.load,
                                       t->rank == 0, &t->sched, err, errlen);
    if (rc == 0)
      mt_resume_note_batch(saved_cfg, cfg, st.consumed_samples, t->rank == 0);
  }
  free(saved_cfg);
  if (rc < 0) return -1;
  if (finetune) {
    reset_optimizer(t);
    if (t->rank == 0)
      printf("> fine-tuning from the weights of '%s' (iteration %lld): iteration, optimizer "
             "state and data position start afresh\n",
             cfg->checkpoint.load, (long long)st.iteration);
    t->iteration = t->consumed_samples = t->skipped_iters = t->nan_iters = 0;
  } else {
    if (st.seed != cfg->training.seed) {
      snprintf(err, errlen,
               "checkpoint in '%s' was trained with training.seed %llu but the config says %llu",
               cfg->checkpoint.load, (unsigned long long)st.seed,
               (unsigned long long)cfg->training.seed);
      return -1;
    }
    if (t->zero) t->zero->step = step;
    else t->opt.step = step;
    t->iteration = st.iteration;
    t->consumed_samples = st.consumed_samples;
    /* Megatron's scheduler step count; a checkpoint without the state
     * (before issue 30 item 4, or the previous format): the consumed
     * samples, which it equals (megatrain steps the schedule every update) */
    t->sched_steps = sched_state.present ? sched_state.num_steps : st.consumed_samples;
    t->skipped_iters = st.skipped_iters;
    t->nan_iters = st.nan_iters;
  }
  if (t->rank == 0) {
    printf(" loaded checkpoint at iteration %lld from %s in %.2f s%s\n", (long long)st.iteration,
           cfg->checkpoint.load, mt_now() - t0, any_legacy ? " (previous per-layout format)" : "");
    fflush(stdout);
  }
  return 0;
}

int mt_trainer_load_checkpoint(mt_trainer *t, char *err, size_t errlen) {
  err[0] = '\0';
  int agreed = 1;
  int rc = load_checkpoint(t, &agreed, err, errlen);
  /* every rank holds the same message: rank 0 prints it (train.c) */
  if (rc != 0 && agreed && t->rank != 0) err[0] = '\0';
  return rc;
}
