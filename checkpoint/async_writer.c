/* checkpoint/async_writer.c — asynchronous checkpoint saves (checkpoint/async_writer.h). */
#include "checkpoint/async_writer.h"

#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"

struct mt_ckpt_async {
  mt_dckpt_pending *p;   /* NULL: nothing pending */
  mt_dckpt_view *views;  /* host snapshot views (write views point into snap) */
  int n_views, rank;
  unsigned char *snap;   /* host snapshot, reused across saves */
  size_t snap_cap;
  pthread_t thread;
  int running;           /* thread started and not joined */
  atomic_int done;       /* set by the writer when it returns */
  double t_start, t_end;
};

mt_ckpt_async *mt_ckpt_async_create(void) {
  mt_ckpt_async *a = mt_xcalloc(1, sizeof *a);
  atomic_init(&a->done, 0);
  return a;
}

/* Niceness of the writer thread: training keeps the CPU when both want it
 * (the writer mostly waits for the disk; a nice 10 thread still gets about a
 * tenth of a busy core, so it always progresses). */
#define WRITER_NICE 10

static void write_now(mt_ckpt_async *a) {
  mt_dckpt_save_write(a->p, a->rank, NULL, a->views, a->n_views);
  a->t_end = mt_now();
  atomic_store(&a->done, 1);
}

static void *writer_main(void *arg) {
  setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), WRITER_NICE); /* this thread only */
  write_now(arg);
  return NULL;
}

/* Bytes of the host snapshot of `views`: each written view, 8-aligned. */
static size_t snapshot_bytes(const mt_dckpt_view *views, int n_views) {
  size_t need = 0;
  for (int i = 0; i < n_views; i++)
    if (views[i].write && views[i].hi > views[i].lo)
      need += (size_t)mt_round_up((views[i].hi - views[i].lo) *
                                      (int64_t)mt_dtype_size(views[i].dtype), 8);
  return need;
}

void mt_ckpt_async_reserve(mt_ckpt_async *a, const mt_dckpt_view *views, int n_views) {
  size_t need = snapshot_bytes(views, n_views);
  if (need <= a->snap_cap) return;
  free(a->snap);
  a->snap = mt_xmalloc(need);
  memset(a->snap, 0, need); /* fault the pages in now, not in a save iteration */
  a->snap_cap = need;
}

int mt_ckpt_async_start(mt_ckpt_async *a, const char *save_dir, const mt_dckpt_meta *meta,
                        const char *config_json, mt_backend *be, const mt_dckpt_view *views,
                        int n_views, mt_group *world, mt_dckpt_guard_fn guard, void *guard_ctx,
                        char *err, size_t errlen) {
  MT_ASSERT(!a->p && !a->running);
  if (mt_dckpt_save_begin(save_dir, meta, config_json, views, n_views, world, &a->p, err, errlen))
    return -1;
  mt_dckpt_save_set_guard(a->p, guard, guard_ctx);
  mt_ckpt_async_reserve(a, views, n_views);
  free(a->views);
  a->views = mt_xmalloc((size_t)(n_views ? n_views : 1) * sizeof *a->views);
  memcpy(a->views, views, (size_t)n_views * sizeof *views);
  a->n_views = n_views;
  size_t off = 0;
  for (int i = 0; i < n_views; i++) {
    mt_dckpt_view *v = &a->views[i];
    if (!(v->write && v->hi > v->lo)) continue;
    size_t nb = (size_t)(v->hi - v->lo) * mt_dtype_size(v->dtype);
    if (be && !v->host) be->ops->memcpy_d2h(be, a->snap + off, v->data, nb);
    else memcpy(a->snap + off, v->data, nb);
    v->data = a->snap + off;
    v->host = 1;
    off += (size_t)mt_round_up((int64_t)nb, 8);
  }
  a->rank = world ? mt_group_rank(world) : 0;
  a->t_start = mt_now();
  atomic_store(&a->done, 0);
  sigset_t all, old; /* the writer blocks every signal: handlers run on the main thread */
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &old);
  int rc = pthread_create(&a->thread, NULL, writer_main, a);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (rc != 0) {
    write_now(a); /* no thread: write now (still correct, just synchronous) */
  } else {
    a->running = 1;
  }
  return 0;
}

static void join(mt_ckpt_async *a) {
  if (!a->running) return;
  pthread_join(a->thread, NULL);
  a->running = 0;
}

int mt_ckpt_async_poll(mt_ckpt_async *a, mt_group *world, int wait, int64_t *iteration,
                       double *write_s, char *err, size_t errlen) {
  if (!a || !a->p) return 0;
  if (wait) {
    join(a);
  } else {
    int32_t busy = !atomic_load(&a->done);
    if (world) mt_allreduce(world, &busy, 1, MT_I32, MT_OP_MAX);
    if (busy) return 0;
    join(a);
  }
  *write_s = a->t_end - a->t_start;
  *iteration = mt_dckpt_pending_iteration(a->p);
  mt_dckpt_pending *p = a->p;
  a->p = NULL;
  const int rc = mt_dckpt_save_finish(p, world, err, errlen);
  return rc ? rc : 1; /* -1 or MT_DCKPT_UNREFERENCED */
}

void mt_ckpt_async_destroy(mt_ckpt_async *a) {
  if (!a) return;
  join(a);
  mt_dckpt_save_abandon(a->p);
  free(a->views);
  free(a->snap);
  free(a);
}
