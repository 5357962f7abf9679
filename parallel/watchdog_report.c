/* parallel/watchdog_report.c — the hang report and the note of a rank that
 * was not scheduled (watchdog_impl.h; docs/communication.md "Hang
 * diagnosis"). Everything here reads the other ranks' records without their
 * cooperation: the node's shared window, else their heartbeat files. */
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "watchdog_impl.h"

/* A plain copy of what a report needs of one rank. */
typedef struct {
  int known;        /* 0: no record to read (another node, no heartbeat file) */
  int from_file;    /* read from a heartbeat file (clocks of another node) */
  int32_t last_slot, period_ms, reported;
  int32_t named[WD_NAMED];
  int64_t tick_ns, tick_real_ns, gap_ns, gap_end_ns;
} wd_head;

typedef struct {
  int64_t ops, iteration, gid, started_ns;
  int32_t pending, kind, peer;
} wd_op;

/* Bytes [off, off + n) of world rank wr's record: in the node's window
 * (returned in place), else read from its heartbeat file into buf (*file
 * set); NULL when unknown. */
static const void *part(mt_watchdog *w, int wr, size_t off, void *buf, size_t n, int *file) {
  *file = 0;
  if (w->peer[wr]) return (const char *)w->peer[wr] + off;
  if (!w->hb_prefix[0]) return NULL;
  char path[600];
  snprintf(path, sizeof path, "%s%d", w->hb_prefix, wr);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return NULL;
  ssize_t k = pread(fd, buf, n, (off_t)off);
  close(fd);
  *file = 1;
  return k == (ssize_t)n ? buf : NULL;
}

static wd_head read_head(mt_watchdog *w, int wr) {
  wd_head h = {0};
  wd_record r; /* only the head (before the names) is read into it */
  int file;
  const wd_record *src = part(w, wr, 0, &r, offsetof(wd_record, name), &file);
  if (!src) return h;
  const memory_order o = memory_order_relaxed;
  h.known = 1;
  h.from_file = file;
  h.last_slot = atomic_load_explicit(&src->last_slot, o);
  h.period_ms = atomic_load_explicit(&src->period_ms, o);
  h.tick_ns = atomic_load_explicit(&src->tick_ns, memory_order_acquire);
  h.gap_end_ns = atomic_load_explicit(&src->gap_end_ns, memory_order_acquire);
  h.gap_ns = atomic_load_explicit(&src->gap_ns, o);
  h.reported = atomic_load_explicit(&src->reported, memory_order_acquire);
  for (int i = 0; i < WD_NAMED; i++) h.named[i] = h.reported ? atomic_load_explicit(&src->named[i], o) : -1;
  h.tick_real_ns = atomic_load_explicit(&src->tick_real_ns, o);
  return h;
}

/* Slot s of world rank wr; 0 when unknown. */
static int read_op(mt_watchdog *w, int wr, int s, wd_op *op) {
  wd_slot tmp;
  int file;
  const wd_slot *src =
      part(w, wr, offsetof(wd_record, slot) + (size_t)s * sizeof(wd_slot), &tmp, sizeof tmp, &file);
  if (!src) return 0;
  const memory_order o = memory_order_relaxed;
  op->pending = atomic_load_explicit(&src->pending, memory_order_acquire);
  op->ops = atomic_load_explicit(&src->ops, o);
  op->iteration = atomic_load_explicit(&src->iteration, o);
  op->started_ns = atomic_load_explicit(&src->started_ns, o);
  op->gid = atomic_load_explicit(&src->gid, o);
  op->kind = atomic_load_explicit(&src->kind, o);
  op->peer = atomic_load_explicit(&src->peer, o);
  return 1;
}

/* Seconds since rank wr's watchdog thread last ran, when that is more than
 * three of its periods and a second (else 0; -1 unknown). */
static double stale_s(const wd_head *h) {
  if (!h->known || h->tick_ns <= 0) return -1;
  const int64_t age = h->from_file ? mt_wd_real_ns() - h->tick_real_ns : mt_wd_now_ns() - h->tick_ns;
  const int64_t lim = 3 * (int64_t)h->period_ms * 1000000 + 1000000000;
  return age > lim ? (double)age / 1e9 : 0;
}

/* How long until rank wr's tick, if it is not refreshed, is old enough for
 * stale_s to count it (0: already is, or unknown). */
static int64_t until_stale_ns(const wd_head *h) {
  if (!h->known || h->tick_ns <= 0) return 0;
  const int64_t age = h->from_file ? mt_wd_real_ns() - h->tick_real_ns : mt_wd_now_ns() - h->tick_ns;
  const int64_t lim = 3 * (int64_t)h->period_ms * 1000000 + 1000000000;
  return age <= lim ? lim - age : 0;
}

/* Whether rank wr (head h, its operation op when pending, else NULL) is
 * not running, or was not while in op: its watchdog thread has not run for
 * over three periods and a second, or its last gap (the thread due but not
 * run) ended after op started (both in its own clock). Describes it in buf
 * ("its watchdog thread has not run for 3.4 s" / "it was not scheduled for
 * 3.0 s while in it"). */
static int not_running(const wd_head *h, const wd_op *op, char *buf, size_t n) {
  buf[0] = '\0';
  const double s = stale_s(h);
  if (s > 0) {
    snprintf(buf, n, "its watchdog thread has not run for %.1f s%s", s,
             h->from_file ? " by its heartbeat file and the two nodes' clocks" : "");
    return 1;
  }
  if (op && h->gap_end_ns > op->started_ns && h->gap_ns > 0) {
    snprintf(buf, n, "it was not scheduled for %.1f s while in it", (double)h->gap_ns / 1e9);
    return 1;
  }
  return 0;
}

/* "waiting in all-gather on dp group at iteration 3, op #57" for world
 * rank wr, or why it cannot be told; *waiting: whether it is in an operation. */
static void describe_peer(mt_watchdog *w, int wr, char *buf, size_t n, int *waiting) {
  const wd_head h = read_head(w, wr);
  *waiting = 0;
  if (!h.known) {
    snprintf(buf, n, "state unknown: on another node%s",
             w->hb_prefix[0] ? ", no heartbeat file" : " (set MEGATRAIN_HEARTBEAT_DIR)");
    return;
  }
  char why[160], live[420] = "";
  if (not_running(&h, NULL, why, sizeof why))
    snprintf(live, sizeof live, "; %s: stopped, e.g. by SIGSTOP, or not run by its host", why);
  wd_op op;
  if (h.last_slot < 0 || h.last_slot >= WD_SLOTS || !read_op(w, wr, h.last_slot, &op)) {
    snprintf(buf, n, "no operation started yet%s", live);
    return;
  }
  if (!live[0] && op.pending && not_running(&h, &op, why, sizeof why))
    snprintf(live, sizeof live, "; %s: stopped, e.g. by SIGSTOP, or not run by its host", why);
  if (h.reported) {
    /* its own report is out and the job is ending: its state moves on, what
     * it found holding it up does not */
    size_t q = strlen(live);
    q += (size_t)snprintf(live + q, sizeof live - q, "; it has reported a hang itself, naming rank");
    for (int i = 0; i < WD_NAMED && h.named[i] >= 0 && q < sizeof live; i++)
      q += (size_t)snprintf(live + q, sizeof live - q, "%s %d", i ? "," : "", h.named[i]);
    if (q < sizeof live) snprintf(live + q, sizeof live - q, ", and is ending the job");
  }
  char nbuf[32], name[32] = "?";
  int file;
  const char *np = part(w, wr, offsetof(wd_record, name) + (size_t)h.last_slot * 32, nbuf,
                        sizeof nbuf, &file);
  if (np) snprintf(name, sizeof name, "%.31s", np);
  *waiting = op.pending;
  snprintf(buf, n, "%s %s on %s group at iteration %lld, op #%lld%s",
           op.pending ? "waiting in" : "last seen in", mt_wd_kind_name(op.kind), name,
           (long long)op.iteration, (long long)op.ops, live);
}

/* The ranks that world rank r, waiting in the operation of its last slot,
 * waits for: its peer (point-to-point) or the members of that group (same
 * group identity) that have started fewer operations on it. Appends them
 * to out[] (without duplicates of seen[]); returns how many. */
static int waits_for(mt_watchdog *w, int r, char *seen, int *out, int64_t *until_ns) {
  const wd_head h = read_head(w, r);
  int k = 0;
  if (h.known && h.reported) {
    /* a rank whose own report is out leads to the ranks it named (-1: all
     * named already, r is not where the waits end) */
    for (int i = 0; i < WD_NAMED && h.named[i] >= 0; i++)
      if (h.named[i] < w->d->size && !seen[h.named[i]]) {
        seen[h.named[i]] = 1;
        out[k++] = h.named[i];
      }
    if (k > 0 || h.named[0] >= 0) return k > 0 ? k : -1;
  }
  wd_op op;
  if (!h.known || h.last_slot < 0 || h.last_slot >= WD_SLOTS || !read_op(w, r, h.last_slot, &op) ||
      !op.pending)
    return 0;
  if (op.kind == MT_WD_WAIT_SEND || op.kind == MT_WD_WAIT_RECV) {
    if (op.peer >= 0 && op.peer < w->d->size && !seen[op.peer]) {
      seen[op.peer] = 1;
      out[k++] = op.peer;
    }
    return k;
  }
  for (int q = 0; q < w->d->size; q++) {
    wd_op o;
    if (seen[q] || q == r || !read_op(w, q, h.last_slot, &o) || o.gid != op.gid) continue;
    if (o.ops < op.ops) {
      seen[q] = 1;
      out[k++] = q;
    }
  }
  if (k > 0) return k;
  /* every member started it: r waits for the members that are not running
   * (or were not after they started it: one woken by the abort's SIGCONT
   * may have completed it since) */
  char why[160];
  int64_t until = 0;
  for (int q = 0; q < w->d->size; q++) {
    wd_op o;
    if (seen[q] || q == r || !read_op(w, q, h.last_slot, &o) || o.gid != op.gid) continue;
    const wd_head hq = read_head(w, q);
    if (not_running(&hq, &o, why, sizeof why)) {
      seen[q] = 1;
      out[k++] = q;
    } else if (until_stale_ns(&hq) > until) {
      until = until_stale_ns(&hq);
    }
  }
  /* none looks stopped yet: one stopped right after it started cannot be
   * told from a slow network until its tick is old enough */
  if (k == 0 && until > *until_ns) *until_ns = until;
  return k;
}

/* Follow the waits from the ranks in queue[0..n) (already in seen[]) to the
 * ranks that wait for nobody: in no operation, in one every other member
 * has started while running, or unknown; a rank whose own report is out
 * leads to the ranks it named. Sets ends[0..*n_ends); returns whether any
 * wait led on from the start. *until_ns: at least how long until a member
 * of an operation that an end waits in, which every member started and
 * none looks stopped in, could count as stopped (left as is when none). */
static int chain_ends(mt_watchdog *w, int *queue, int n, char *seen, int *ends, int *n_ends,
                      int64_t *until_ns) {
  int head = 0, moved = 0;
  *n_ends = 0;
  while (head < n) {
    const int r = queue[head++];
    const int k = waits_for(w, r, seen, queue + n, until_ns);
    if (k == 0) ends[(*n_ends)++] = r;
    else moved = 1;
    if (k > 0) n += k;
  }
  return moved;
}

void mt_wd_note_unscheduled(mt_watchdog *w, int64_t from_ns, int64_t gap_ns) {
  const memory_order o = memory_order_relaxed;
  const int me = w->d->rank, ls = atomic_load_explicit(&w->own->last_slot, o);
  char in[512] = "";
  if (ls >= 0 && ls < WD_SLOTS && w->local[ls].used) {
    const wd_slot *s = &w->own->slot[ls];
    const int pending = atomic_load_explicit(&s->pending, memory_order_acquire);
    const int64_t started = atomic_load_explicit(&s->started_ns, o);
    if (started <= from_ns)
      snprintf(in, sizeof in, "; its last operation, %s on %s (iteration %lld, op #%lld), started "
               "%.1f s ago and %s", mt_wd_kind_name(atomic_load_explicit(&s->kind, o)),
               w->local[ls].label, (long long)atomic_load_explicit(&s->iteration, o),
               (long long)atomic_load_explicit(&s->ops, o),
               (double)(mt_wd_now_ns() - started) / 1e9,
               pending ? "is still pending" : "has completed");
  }
  fprintf(stderr,
          "[rank %d] megatrain: warning: rank %d: this rank was not scheduled for %.1f s (its "
          "watchdog thread, due every %.2f s, did not run: the process was stopped, e.g. by "
          "SIGSTOP or a debugger, or the host did not run it)%s; time not scheduled does not "
          "count toward parallel.distributed_timeout_minutes = %.2f\n",
          me, me, (double)gap_ns / 1e9, (double)atomic_load_explicit(&w->own->period_ms, o) / 1e3,
          in, (double)atomic_load(&w->timeout_ns) / 6e10);
  fflush(stderr);
}

/* Every member of the group has started the operation and none looks
 * stopped yet. A member stopped right after it started (SIGSTOP, a frozen
 * host) is told apart from a slow network only once its watchdog thread has
 * missed its period long enough (stale_s): a rank whose own deadline came
 * first may report before that. Wait once, at most that limit, until each
 * member's tick is either refreshed or old enough to count, so that the
 * report names the stopped rank instead of "every member is running". */
static void await_stale(mt_watchdog *w, const wd_local *l, int me, int slot) {
  int64_t wait_ns = 0;
  for (int i = 0; i < l->n; i++) {
    const int wr = l->world_ranks[i];
    wd_op op;
    if (wr == me || !read_op(w, wr, slot, &op)) continue;
    const wd_head h = read_head(w, wr);
    if (!h.known || h.tick_ns <= 0) continue;
    const int64_t age =
        h.from_file ? mt_wd_real_ns() - h.tick_real_ns : mt_wd_now_ns() - h.tick_ns;
    const int64_t lim = 3 * (int64_t)h.period_ms * 1000000 + 1000000000;
    if (age <= lim && lim - age > wait_ns) wait_ns = lim - age;
  }
  if (wait_ns <= 0) return;
  wait_ns += 100000000; /* past the limit, not at it */
  struct timespec ts = {(time_t)(wait_ns / 1000000000), (long)(wait_ns % 1000000000)};
  nanosleep(&ts, NULL);
}

void mt_wd_expire(mt_watchdog *w, int slot, int64_t waited_ns, int64_t unscheduled_ns) {
  const wd_slot *s = &w->own->slot[slot];
  const wd_local *l = &w->local[slot];
  const memory_order o = memory_order_relaxed;
  const int kind = atomic_load_explicit(&s->kind, o), me = w->d->rank, N = w->d->size;
  const int64_t my_ops = atomic_load_explicit(&s->ops, o);
  const size_t cap = 8192;
  char *msg = mt_xmalloc(cap), who[512], off[128] = "";
  if (unscheduled_ns > 0)
    snprintf(off, sizeof off, ", %.1f s of which this rank was not scheduled",
             (double)unscheduled_ns / 1e9);
  size_t p = (size_t)snprintf(
      msg, cap,
      "[rank %d] megatrain: error: rank %d: %s on %s (%lld bytes, iteration %lld, micro-batch %d, "
      "op #%lld) has not completed after %.2f minutes%s (parallel.distributed_timeout_minutes = "
      "%.2f); ",
      me, me, mt_wd_kind_name(kind), l->label,
      (long long)atomic_load_explicit(&s->bytes, o),
      (long long)atomic_load_explicit(&s->iteration, o),
      (int)atomic_load_explicit(&s->micro_batch, o), (long long)my_ops, (double)waited_ns / 6e10,
      off, (double)atomic_load(&w->timeout_ns) / 6e10);
  char *seen = mt_xcalloc((size_t)N, 1);
  int *queue = mt_xmalloc(sizeof(int) * (size_t)N), nq = 0;
  seen[me] = 1;
  if (kind == MT_WD_WAIT_SEND || kind == MT_WD_WAIT_RECV) {
    const int wr = atomic_load_explicit(&s->peer, o);
    if (wr >= 0 && wr < N) {
      int waiting;
      describe_peer(w, wr, who, sizeof who, &waiting);
      p += (size_t)snprintf(msg + p, cap - p, "its peer is rank %d (%s)", wr, who);
      seen[wr] = 1;
      queue[nq++] = wr;
    }
  } else {
    int behind = 0, unknown = 0;
    for (int i = 0; i < l->n && p < cap; i++) {
      const int wr = l->world_ranks[i];
      wd_op op;
      if (wr == me) continue;
      if (!read_op(w, wr, slot, &op)) {
        unknown++; /* no record to read: named below, never as "not reached" */
        continue;
      }
      if (op.ops >= my_ops) continue;
      int waiting;
      describe_peer(w, wr, who, sizeof who, &waiting);
      p += (size_t)snprintf(msg + p, cap - p, "%s%d (%s)",
                            behind++ ? ", " : "ranks that have not reached it: ", wr, who);
      seen[wr] = 1;
      queue[nq++] = wr;
    }
    if (unknown && p < cap) {
      p += (size_t)snprintf(msg + p, cap - p, "%sstate unknown of rank", behind ? "; " : "");
      for (int i = 0, k = 0; i < l->n && p < cap; i++) {
        const int wr = l->world_ranks[i];
        wd_op op;
        if (wr == me || read_op(w, wr, slot, &op)) continue;
        p += (size_t)snprintf(msg + p, cap - p, "%s %d", k++ ? "," : "", wr);
      }
      if (p < cap)
        p += (size_t)snprintf(msg + p, cap - p,
                              " (not on this node's shared window and no heartbeat file: set "
                              "MEGATRAIN_HEARTBEAT_DIR to a directory every node shares)");
    } else if (!behind && p < cap) {
      /* every member started it: name the ones whose process is not running */
      p += (size_t)snprintf(msg + p, cap - p, "every rank of the group has started op #%lld on it",
                            (long long)my_ops);
      int stale = 0;
      char why[160];
      int any = 0;
      for (int i = 0; i < l->n && !any; i++) {
        const int wr = l->world_ranks[i];
        wd_op op;
        if (wr == me || !read_op(w, wr, slot, &op)) continue;
        const wd_head h = read_head(w, wr);
        any = not_running(&h, &op, why, sizeof why);
      }
      if (!any) await_stale(w, l, me, slot);
      for (int i = 0; i < l->n && p < cap; i++) {
        const int wr = l->world_ranks[i];
        wd_op op;
        if (wr == me || !read_op(w, wr, slot, &op)) continue;
        const wd_head h = read_head(w, wr);
        if (!not_running(&h, &op, why, sizeof why)) continue;
        p += (size_t)snprintf(msg + p, cap - p,
                              "%s%d (%s: stopped, e.g. by SIGSTOP, or not run by its host)",
                              stale++ ? ", " : "; ranks of it that are not running: ", wr, why);
        seen[wr] = 1;
        queue[nq++] = wr;
      }
      if (p < cap)
        p += (size_t)snprintf(msg + p, cap - p, "%s",
                              stale ? "" : ", and every member's watchdog thread is running, yet "
                                           "it has not completed");
    }
  }
  /* where the waits lead; published (before the report) for the reports of
   * ranks that reach this one once it is ending the job */
  int *ends = mt_xmalloc(sizeof(int) * (size_t)N), n_ends = 0;
  const int n0 = nq;
  int *start = mt_xmalloc(sizeof(int) * (size_t)(n0 ? n0 : 1));
  memcpy(start, queue, sizeof(int) * (size_t)n0);
  int64_t until = 0;
  char *seen0 = mt_xmalloc((size_t)N);
  memcpy(seen0, seen, (size_t)N);
  int moved = nq > 0 && chain_ends(w, queue, nq, seen, ends, &n_ends, &until);
  if (until > 0) {
    /* the waits end at an operation every member started and none looks
     * stopped in: wait (once, at most three periods and a second) until a
     * stopped member's tick counts, then follow the waits again */
    until += 100000000;
    struct timespec ts = {(time_t)(until / 1000000000), (long)(until % 1000000000)};
    nanosleep(&ts, NULL);
    memcpy(seen, seen0, (size_t)N);
    int64_t again = 0;
    moved = chain_ends(w, queue, nq, seen, ends, &n_ends, &again);
  }
  free(seen0);
  if (moved) {
    for (int i = 0; i < n_ends && p < cap; i++) {
      int waiting;
      describe_peer(w, ends[i], who, sizeof who, &waiting);
      p += (size_t)snprintf(msg + p, cap - p, "%s%d (%s)", i ? ", " : "; their waits lead to: ",
                            ends[i], who);
    }
  }
  int *named = mt_xmalloc(sizeof(int) * (size_t)N), n_named = n_ends > 0 ? n_ends : n0;
  memcpy(named, n_ends > 0 ? ends : start, sizeof(int) * (size_t)n_named);
  /* reports already out that these waits did not reach: the job's state has
   * moved since (the abort's SIGCONT wakes a stopped rank, which may finish
   * the operation it was stopped in), so what they named is quoted */
  for (int r = 0; r < N && p < cap; r++) {
    if (r == me || seen[r]) continue;
    const wd_head h = read_head(w, r);
    if (!h.known || !h.reported) continue;
    for (int i = 0, k = 0; i < WD_NAMED && h.named[i] >= 0 && p < cap; i++) {
      const int x = h.named[i];
      if (x >= N || seen[x]) continue;
      seen[x] = 1;
      named[n_named++] = x;
      int waiting;
      describe_peer(w, x, who, sizeof who, &waiting);
      if (k++ == 0)
        p += (size_t)snprintf(msg + p, cap - p,
                              "; rank %d reported a hang before this rank and is ending the job, "
                              "naming: ", r);
      if (p < cap)
        p += (size_t)snprintf(msg + p, cap - p, "%s%d (%s)", k > 1 ? ", " : "", x, who);
    }
  }
  for (int i = 0; i < WD_NAMED; i++)
    atomic_store_explicit(&w->own->named[i], i < n_named ? named[i] : -1, o);
  atomic_store_explicit(&w->own->reported, 1, memory_order_release);
  if (w->hb_fd >= 0 && pwrite(w->hb_fd, w->own, sizeof *w->own, 0) < 0) {
    /* the heartbeat copy only helps the other ranks' reports */
  }
  free(named);
  free(ends);
  free(start);
  fprintf(stderr, "%s\n", msg);
  fflush(stderr);
  free(msg);
  free(seen);
  free(queue);
  /* NCCL groups first (their kernels may hold the GPU), then the job. */
  for (int i = 0; i < WD_SLOTS; i++)
    if (w->local[i].used && w->local[i].g && w->local[i].g->ops->abort)
      w->local[i].g->ops->abort(w->local[i].g);
  /* MPI_Abort from this thread while the main thread blocks in MPI: Open MPI
   * 4.1 ends the job (tests/integration/test_hang.sh); _exit if it returns. */
  MPI_Abort(MPI_COMM_WORLD, 1);
  _exit(1);
}
