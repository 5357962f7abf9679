/* parallel/pipeline.c — the 1F1B and interleaved schedule builders (one
 * shared three-phase emitter) and the executor that runs either (see
 * pipeline.h). */
#include "parallel/pipeline.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"

/* Interleaved: chunk of virtual micro-batch k (Megatron get_model_chunk_id). */
static int chunk_of(int k, int p, int v, int fwd) {
  int c = (k % (p * v)) / p;
  return fwd ? c : v - 1 - c;
}

/* Interleaved: micro-batch of virtual micro-batch k
 * (Megatron get_microbatch_id_in_model_chunk). */
static int mb_of(int k, int p, int v) { return (k / (p * v)) * p + k % p; }

/* Virtual micro-batch k as an action: its chunk and micro-batch. With v == 1
 * this is (chunk 0, micro-batch k), the 1F1B order. */
static mt_pp_action action_of(int k, int p, int v, int fwd) {
  mt_pp_action a = {fwd, v > 1 ? chunk_of(k, p, v, fwd) : 0, v > 1 ? mb_of(k, p, v) : k};
  return a;
}

static int check_args(int p, int v, int m, int r, char *err, size_t errlen) {
  if (p < 1 || v < 1 || m < 1 || r < 0 || r >= p) {
    snprintf(err, errlen, "invalid pipeline schedule: p=%d v=%d m=%d stage %d", p, v, m, r);
    return -1;
  }
  return 0;
}

/* The shared three-phase order of both builders: `warm` forwards, then
 * (forward, backward) pairs, then the remaining backwards, over the m·v
 * virtual micro-batches; forward_only: the m·v forwards. */
static void emit(mt_pp_schedule *s, int p, int v, int m, int warm, int forward_only) {
  const int total = m * v;
  s->actions = mt_xcalloc((size_t)(2 * total), sizeof(mt_pp_action));
  int n = 0;
  if (forward_only) {
    for (int k = 0; k < total; k++) s->actions[n++] = action_of(k, p, v, 1);
    s->n_actions = n;
    s->n_warmup = total;
    return;
  }
  const int steady = total - warm;
  for (int k = 0; k < warm; k++) s->actions[n++] = action_of(k, p, v, 1);
  for (int k = 0; k < steady; k++) {
    s->actions[n++] = action_of(k + warm, p, v, 1);
    s->actions[n++] = action_of(k, p, v, 0);
  }
  for (int k = steady; k < total; k++) s->actions[n++] = action_of(k, p, v, 0);
  s->n_actions = n;
  s->n_warmup = warm;
  s->n_steady = steady;
  s->n_cooldown = warm;
}

int mt_pp_schedule_1f1b(mt_pp_schedule *s, int p, int m, int r, int forward_only, char *err,
                        size_t errlen) {
  memset(s, 0, sizeof *s);
  if (check_args(p, 1, m, r, err, errlen) != 0) return -1;
  emit(s, p, 1, m, p - r - 1 < m ? p - r - 1 : m, forward_only);
  return 0;
}

int mt_pp_schedule_interleaved(mt_pp_schedule *s, int p, int v, int m, int r, int forward_only,
                               char *err, size_t errlen) {
  memset(s, 0, sizeof *s);
  if (check_args(p, v, m, r, err, errlen) != 0) return -1;
  if (v < 2) {
    snprintf(err, errlen,
             "the interleaved schedule needs at least 2 model chunks per stage (v=%d; use 1F1B)",
             v);
    return -1;
  }
  if (m % p != 0) {
    snprintf(err, errlen,
             "the interleaved schedule needs the number of micro-batches (%d) to be a multiple "
             "of pipeline_model_parallel_size (%d)",
             m, p);
    return -1;
  }
  const int total = m * v;
  int warm = total;
  if (m != p) {
    warm = (p - r - 1) * 2 + (v - 1) * p;
    if (warm > total) warm = total;
  }
  emit(s, p, v, m, warm, forward_only);
  return 0;
}

void mt_pp_schedule_free(mt_pp_schedule *s) {
  free(s->actions);
  memset(s, 0, sizeof *s);
}

int mt_pp_prev_stage(int p, int v, int r, int chunk, int *peer_chunk) {
  if (r == 0 && chunk == 0) return -1;
  *peer_chunk = r > 0 ? chunk : chunk - 1;
  (void)v;
  return (r + p - 1) % p;
}

int mt_pp_next_stage(int p, int v, int r, int chunk, int *peer_chunk) {
  if (r == p - 1 && chunk == v - 1) return -1;
  *peer_chunk = r < p - 1 ? chunk : chunk + 1;
  return (r + 1) % p;
}

int mt_pp_tag(int v, int chunk, int mb, int is_grad) {
  int tag = ((mb * v) + chunk) * 2 + is_grad;
  MT_ASSERT(tag >= 0 && tag < 32768);
  return tag;
}

/* Pool of gradient send buffers (device memory, MT_MEM_COMM). */
typedef struct {
  void **buf;
  mt_request **req; /* NULL when free */
  int n;
} send_pool;

static void pool_reap(send_pool *sp, int block) {
  for (int i = 0; i < sp->n; i++)
    if (sp->req[i]) {
      if (block) {
        mt_wait(sp->req[i]);
        sp->req[i] = NULL;
      } else if (mt_test(sp->req[i])) {
        sp->req[i] = NULL;
      }
    }
}

static int pool_get(send_pool *sp, const mt_pp_model *md) {
  pool_reap(sp, 0);
  for (int i = 0; i < sp->n; i++)
    if (!sp->req[i]) return i;
  sp->buf = mt_xrealloc(sp->buf, (size_t)(sp->n + 1) * sizeof(void *));
  sp->req = mt_xrealloc(sp->req, (size_t)(sp->n + 1) * sizeof(mt_request *));
  sp->buf[sp->n] = md->be->ops->alloc(md->be, (size_t)md->count * mt_dtype_size(md->dtype),
                                      MT_MEM_COMM);
  sp->req[sp->n] = NULL;
  return sp->n++;
}

/* The receive action `a` needs: from the previous stage (forward input) or
 * the next one (output gradient) into buf; NULL when it needs none. */
static mt_request *post_recv(mt_group *pp, int p, int v, int r, const mt_pp_action *a,
                             const mt_pp_model *md, void *buf) {
  int pc;
  const int peer = a->fwd ? mt_pp_prev_stage(p, v, r, a->chunk, &pc)
                          : mt_pp_next_stage(p, v, r, a->chunk, &pc);
  if (peer < 0) return NULL;
  return mt_irecv(pp, peer, mt_pp_tag(v, a->chunk, a->mb, !a->fwd), buf, md->count, md->dtype);
}

static int needs_recv(int p, int v, int r, const mt_pp_action *a) {
  int pc;
  return (a->fwd ? mt_pp_prev_stage(p, v, r, a->chunk, &pc)
                 : mt_pp_next_stage(p, v, r, a->chunk, &pc)) >= 0;
}

int mt_pp_ahead_buffers(int p, int v, int r, const mt_pp_schedule *s) {
  int used[2] = {0, 0};
  for (int i = 1; i < s->n_actions; i++)
    if (needs_recv(p, v, r, &s->actions[i])) used[i % 2] = 1;
  return used[0] + used[1];
}

/* overlap_p2p_comm: the receive of action i + 1, posted before action i
 * computes, lands in buf[(i + 1) % 2] (the model's buffer for it may
 * not exist yet: its slot is taken at begin, and the gradient buffer is in
 * use by a backward) and is copied into the model's buffer when action
 * i + 1 starts. */
typedef struct {
  void *buf[2];
  mt_request *req[2]; /* the receive of action `action[k]`, or NULL */
  int action[2];
} lookahead;

static void *ahead_buf(lookahead *la, int k, const mt_pp_model *md) {
  if (!la->buf[k])
    la->buf[k] = md->be->ops->alloc(md->be, (size_t)md->count * mt_dtype_size(md->dtype),
                                    MT_MEM_COMM);
  return la->buf[k];
}

/* The input (forward) or output gradient (backward) of action i in dst,
 * waited for as bubble time: from its receive posted one action ahead when
 * there is one, else posted now. With `overlap`, the receive of action i + 1
 * is posted (after action i's, keeping each channel's posting order) before
 * this returns, so it travels while action i computes. */
static void receive(mt_group *pp, int p, int v, int r, const mt_pp_schedule *s, int i,
                    const mt_pp_model *md, int overlap, lookahead *la, void *dst, double *wait) {
  const mt_pp_action *a = &s->actions[i];
  const int k = i % 2;
  mt_request *cur = NULL;
  void *from = dst;
  if (la->req[k] && la->action[k] == i) {
    cur = la->req[k];
    from = la->buf[k];
    la->req[k] = NULL;
  } else {
    cur = post_recv(pp, p, v, r, a, md, dst);
  }
  if (overlap && i + 1 < s->n_actions && needs_recv(p, v, r, &s->actions[i + 1])) {
    const int k1 = (i + 1) % 2;
    MT_ASSERT(!la->req[k1]);
    la->req[k1] = post_recv(pp, p, v, r, &s->actions[i + 1], md, ahead_buf(la, k1, md));
    la->action[k1] = i + 1;
  }
  if (!cur) return;
  const double tw = mt_now();
  mt_wait(cur);
  *wait += mt_now() - tw;
  if (from != dst)
    md->be->ops->memcpy_d2d(md->be, dst, from, (size_t)md->count * mt_dtype_size(md->dtype));
}

void mt_pp_run(mt_group *pp, int p, int v, int r, const mt_pp_schedule *s, const mt_pp_model *md,
               int overlap_p2p_comm, mt_pp_stats *stats) {
  const double t0 = mt_now();
  double wait = 0.0;
  int in_flight = 0, max_in_flight = 0;
  /* forward-output sends, one per (chunk, mb) in flight */
  int cap = 0;
  for (int i = 0; i < s->n_actions; i++)
    if ((s->actions[i].mb + 1) * v > cap) cap = (s->actions[i].mb + 1) * v;
  mt_request **fwd_send = mt_xcalloc((size_t)(cap ? cap : 1), sizeof(mt_request *));
  send_pool pool = {0};
  lookahead la = {{NULL, NULL}, {NULL, NULL}, {-1, -1}};
  for (int i = 0; i < s->n_actions; i++) {
    const mt_pp_action *a = &s->actions[i];
    int pc;
    mt_group_set_micro_batch(pp, a->mb);
    if (!md->backward) { /* forward only: release micro-batches whose output has left */
      for (int k = 0; k < cap; k++)
        if (fwd_send[k] && mt_test(fwd_send[k])) {
          fwd_send[k] = NULL;
          md->end(md->ctx, k % v, k / v);
          in_flight--;
        }
    }
    if (a->fwd) {
      md->begin(md->ctx, a->chunk, a->mb);
      if (++in_flight > max_in_flight) max_in_flight = in_flight;
      int prev = mt_pp_prev_stage(p, v, r, a->chunk, &pc);
      receive(pp, p, v, r, s, i, md, overlap_p2p_comm, &la,
              prev >= 0 ? md->input_buffer(md->ctx, a->chunk, a->mb) : NULL, &wait);
      md->forward(md->ctx, a->chunk, a->mb);
      int next = mt_pp_next_stage(p, v, r, a->chunk, &pc);
      if (next >= 0)
        fwd_send[a->mb * v + a->chunk] =
            mt_isend(pp, next, mt_pp_tag(v, pc, a->mb, 0),
                     md->output_buffer(md->ctx, a->chunk, a->mb), md->count, md->dtype);
      if (!md->backward) { /* forward only: end once the output has left */
        if (!fwd_send[a->mb * v + a->chunk]) {
          md->end(md->ctx, a->chunk, a->mb);
          in_flight--;
        }
      }
    } else {
      receive(pp, p, v, r, s, i, md, overlap_p2p_comm, &la, md->grad_buffer(md->ctx), &wait);
      md->backward(md->ctx, a->chunk, a->mb);
      int prev = mt_pp_prev_stage(p, v, r, a->chunk, &pc);
      if (prev >= 0) {
        int k = pool_get(&pool, md);
        md->be->ops->memcpy_d2d(md->be, pool.buf[k], md->grad_buffer(md->ctx),
                                (size_t)md->count * mt_dtype_size(md->dtype));
        pool.req[k] =
            mt_isend(pp, prev, mt_pp_tag(v, pc, a->mb, 1), pool.buf[k], md->count, md->dtype);
      }
      /* the next stage consumed our output before sending this gradient */
      mt_wait(fwd_send[a->mb * v + a->chunk]);
      fwd_send[a->mb * v + a->chunk] = NULL;
      md->end(md->ctx, a->chunk, a->mb);
      in_flight--;
    }
  }
  MT_ASSERT(!la.req[0] && !la.req[1]);
  pool_reap(&pool, 1);
  for (int k = 0; k < cap; k++)
    if (fwd_send[k]) {
      mt_wait(fwd_send[k]);
      if (!md->backward) md->end(md->ctx, k % v, k / v);
    }
  for (int i = 0; i < pool.n; i++) md->be->ops->free(md->be, pool.buf[i]);
  for (int k = 0; k < 2; k++)
    if (la.buf[k]) md->be->ops->free(md->be, la.buf[k]);
  free(pool.buf);
  free(pool.req);
  free(fwd_send);
  if (stats) {
    stats->wall_s = mt_now() - t0;
    stats->wait_s = wait;
    stats->max_in_flight = max_in_flight;
  }
}
