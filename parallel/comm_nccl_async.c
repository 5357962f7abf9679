/* parallel/comm_nccl_async.c — the NCCL engine's started collectives
 * (comm.h mt_iallreduce ..; the engine table's start/finish/drain): one
 * communication stream per group, ordered against the compute stream by
 * events only — the host never waits. docs/communication.md, "The NCCL
 * engine".
 *
 *   start:  record `ready` on the compute stream; the communication stream
 *           waits for it (the collective sees everything the compute stream
 *           queued before the start: the gradients it produced), the
 *           collective is issued on the communication stream (the same
 *           entry, the same NCCL call, as the blocking path), and a done
 *           event from the group's free list is recorded after it, and the
 *           group's `tail` event too.
 *   wait:   the compute stream waits for the done event
 *           (cudaStreamWaitEvent): work queued after mt_wait reads the
 *           result in stream order. mt_test asks cudaEventQuery.
 *   drain:  a blocking call of the group (issued on the compute stream)
 *           first makes the compute stream wait for `tail`: it runs after
 *           the started ones (comm.h rule 2), and every rank issues the
 *           group's NCCL calls to the device in one order (rule 1: one
 *           communication stream per group, a FIFO).
 *
 * What the caller must not do before the wait: write a started
 * collective's buffers (send or in-place) or read its receive buffer from
 * the compute stream or the host, and free or reuse them for anything else
 * (the allocator's stream-ordered frees on the compute stream would hand
 * them out while the communication stream still uses them). After mt_wait
 * everything is safe in compute-stream order, with no host synchronisation.
 * Built with MT_HAVE_NCCL only. */
#include <stdlib.h>

#include "comm_impl.h"

#ifdef MT_HAVE_NCCL
#include "comm_nccl_impl.h"

struct mt_nccl_async {
  cudaStream_t stream;   /* the group's communication stream (non-blocking) */
  cudaEvent_t ready;     /* recorded on the compute stream at each start */
  cudaEvent_t tail;      /* recorded after each started collective */
  int tail_pending;      /* started since the compute stream last waited for tail */
  cudaEvent_t *free_ev;  /* done events not in use */
  int n_free, cap_free;
};

static mt_nccl_async *async_of(mt_group *g) {
  mt_nccl_state *s = g->engine_state;
  if (!s->as) {
    mt_nccl_async *a = mt_xcalloc(1, sizeof *a);
    MT_CUDA_CHECK(cudaStreamCreateWithFlags(&a->stream, cudaStreamNonBlocking));
    MT_CUDA_CHECK(cudaEventCreateWithFlags(&a->ready, cudaEventDisableTiming));
    MT_CUDA_CHECK(cudaEventCreateWithFlags(&a->tail, cudaEventDisableTiming));
    s->as = a;
  }
  return s->as;
}

static cudaEvent_t event_get(mt_nccl_async *a) {
  if (a->n_free > 0) return a->free_ev[--a->n_free];
  cudaEvent_t e;
  MT_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  return e;
}

static void event_put(mt_nccl_async *a, cudaEvent_t e) {
  if (a->n_free == a->cap_free) {
    a->cap_free = a->cap_free ? 2 * a->cap_free : 16;
    a->free_ev = mt_xrealloc(a->free_ev, sizeof(cudaEvent_t) * (size_t)a->cap_free);
  }
  a->free_ev[a->n_free++] = e;
}

void mt_nccl_start(mt_group *g, mt_request *r) {
  mt_nccl_state *s = g->engine_state;
  mt_nccl_async *a = async_of(g);
  MT_CUDA_CHECK(cudaEventRecord(a->ready, mt_nccl_stream(g)));
  MT_CUDA_CHECK(cudaStreamWaitEvent(a->stream, a->ready, 0));
  s->issue = a->stream; /* the engine's entries issue on it (comm_nccl.c S()) */
  mt_comm_op_issue(g, g->ops, r->op);
  s->issue = NULL;
  cudaEvent_t done = event_get(a);
  MT_CUDA_CHECK(cudaEventRecord(done, a->stream));
  MT_CUDA_CHECK(cudaEventRecord(a->tail, a->stream));
  a->tail_pending = 1;
  r->engine_state = (void *)done;
  mt_comm_account_add(g, 0, 0, 1); /* executes on the device: no host time to count */
  atomic_store(&r->op->done, 1);   /* nothing left for the host to wait for */
}

int mt_nccl_finish(mt_request *r, int block) {
  mt_nccl_async *a = ((mt_nccl_state *)r->g->engine_state)->as;
  cudaEvent_t done = (cudaEvent_t)r->engine_state;
  if (block) {
    MT_CUDA_CHECK(cudaStreamWaitEvent(mt_nccl_stream(r->g), done, 0));
  } else {
    cudaError_t e = cudaEventQuery(done);
    if (e == cudaErrorNotReady) return 0;
    MT_CUDA_CHECK(e);
  }
  event_put(a, done); /* a wait already queued keeps the record it saw */
  r->engine_state = NULL;
  return 1;
}

void mt_nccl_drain(mt_group *g) {
  mt_nccl_state *s = g->engine_state;
  mt_nccl_async *a = s ? s->as : NULL;
  if (!a || !a->tail_pending) return;
  MT_CUDA_CHECK(cudaStreamWaitEvent(mt_nccl_stream(g), a->tail, 0));
  a->tail_pending = 0;
}

void mt_nccl_async_destroy(mt_group *g) {
  mt_nccl_state *s = g->engine_state;
  mt_nccl_async *a = s ? s->as : NULL;
  if (!a) return;
  cudaStreamSynchronize(a->stream);
  cudaStreamDestroy(a->stream);
  cudaEventDestroy(a->ready);
  cudaEventDestroy(a->tail);
  for (int i = 0; i < a->n_free; i++) cudaEventDestroy(a->free_ev[i]);
  free(a->free_ev);
  free(a);
  s->as = NULL;
}

#else
typedef int mt_comm_nccl_async_unused; /* ISO C: no empty translation unit */
#endif
