/* parallel/comm_nccl_p2p.c — tagged point-to-point over NCCL (comm.h
 * mt_isend / mt_irecv on device buffers of an NCCL group): the pipeline's
 * activation and gradient messages and context parallelism's K/V ring.
 *
 * NCCL has no tags, and a send kernel occupies its stream until the peer's
 * receive runs. One stream or one communicator per group would deadlock the
 * 1F1B steady state (stage r queues "send activation k+1, receive gradient
 * k" while stage r+1 queues "send gradient k, receive activation k+1").
 * So a message travels on a CHANNEL (sender, receiver, tag & 1): its own
 * 2-rank communicator (sender = rank 0, receiver = rank 1) and its own
 * stream, an independent FIFO. Messages of one channel match in posting
 * order; tags are otherwise not compared. Channels exist between ring
 * neighbours of the group only (rank ± 1 mod size): 4 per neighbour (send /
 * receive x tag parity), 8 per rank, 4 when the group has 2 ranks. They
 * are created collectively by mt_group_enable_p2p, never at first use (a
 * blocking handshake inside mt_isend would deadlock the CP ring: every rank
 * would wait in its send for its successor, which waits in its own).
 *
 * Why each channel's receives are posted in its sender's order (so the k-th
 * send meets the k-th receive and both carry the same message):
 *  - Pipeline (parallel/pipeline.c: tag_of = 2 (mb v + chunk) + is_grad, so
 *    activations are even, gradients odd). Channel (r, next, even) carries
 *    only stage r's forward outputs, (r, prev, odd) only its input
 *    gradients. Every stage runs its forwards in increasing virtual
 *    micro-batch k and its backwards in increasing k (emit in pipeline.c;
 *    action_of maps k to (chunk, mb) independently of the stage). r posts
 *    the send of forward (c, mb), index k, after computing it; next posts
 *    the matching receive before its forward (c', mb), c' = c, or c + 1 on
 *    the interleaved wrap p−1 → 0, whose index is k, or k + p: the same
 *    order. Gradients likewise over the backward order (c' = c, or c − 1 on
 *    the wrap 0 → p−1, index k + p). With p = 2 both directions join the
 *    same two ranks, but (0→1, even), (1→0, even), (0→1, odd), (1→0, odd)
 *    are four channels, each with one sender and one kind of message, so
 *    the argument holds per channel. tests/unit/parallel/test_pp_schedule.c checks
 *    the per-channel order for every (p, v, m) it builds.
 *  - CP ring (model/context_parallel.c, TAG_KV even, TAG_DKV odd): at each
 *    ring step every rank posts at most one send to next and one receive
 *    from prev per tag, in step order, and all ranks of the ring run the
 *    same layers' attention forward and backward in the same order; so
 *    channel (r, r+1, parity) sees r's sends and r+1's receives in the same
 *    order (cp = 2: next = prev, still distinct channels per direction).
 * Deadlock freedom then follows from the MPI form's: a channel op waits only
 * for the compute stream up to its posting point and for its peer's op; the
 * compute stream waits only on the messages the host waited on in the MPI
 * form; a send kernel blocks its own channel stream only.
 *
 * Stream order: post records an event on the compute stream (the group's
 * stream, mt_nccl_stream), the channel stream waits for it (the data is
 * written / the buffer is free), ncclSend/ncclRecv run on the channel
 * stream, and a done event is recorded after them. complete(block = 1)
 * makes the compute stream wait for the done event — no host wait: the
 * buffer may be reused or read in stream order. complete(block = 0) asks
 * cudaEventQuery. Done events come from a per-group free list (created on
 * demand, never per message once warm). */
#include <stdlib.h>
#include <string.h>

#include "comm_impl.h"

int mt_nccl_channel_slot(int size, int rank, int peer, int is_send, int tag) {
  if (size < 2 || rank < 0 || rank >= size || peer < 0 || peer >= size || peer == rank) return -1;
  int side = peer == (rank + 1) % size ? 0 : peer == (rank + size - 1) % size ? 1 : -1;
  if (side < 0) return -1;
  return side * 4 + (is_send ? 2 : 0) + (int)((unsigned)tag & 1u);
}

int mt_nccl_channel_count(int size) { return size < 2 ? 0 : size == 2 ? 4 : 8; }

#ifdef MT_HAVE_NCCL
#include "comm_nccl_impl.h"

typedef struct {
  int peer, is_send;     /* group rank of the other end; this rank sends on it */
  ncclComm_t comm;       /* 2 ranks: the sender is rank 0, the receiver rank 1 */
  cudaStream_t stream;   /* non-blocking: no implicit sync with stream 0 */
  cudaEvent_t ready;     /* recorded on the compute stream at each post */
} channel;

struct mt_nccl_p2p {
  channel ch[8];
  int n;                 /* mt_nccl_channel_count(size) */
  cudaEvent_t *free_ev;  /* done events not in use */
  int n_free, cap_free;
};

#define ID_TAG 32767 /* the ids' MPI tag: above every tag the trainer uses */

static cudaEvent_t event_get(mt_nccl_p2p *p) {
  if (p->n_free > 0) return p->free_ev[--p->n_free];
  cudaEvent_t e;
  MT_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  return e;
}

static void event_put(mt_nccl_p2p *p, cudaEvent_t e) {
  if (p->n_free == p->cap_free) {
    p->cap_free = p->cap_free ? 2 * p->cap_free : 16;
    p->free_ev = mt_xrealloc(p->free_ev, sizeof(cudaEvent_t) * (size_t)p->cap_free);
  }
  p->free_ev[p->n_free++] = e;
}

void mt_nccl_p2p_create(mt_group *g) {
  mt_nccl_state *s = g->engine_state;
  if (s->p2p || g->size < 2) return;
  mt_nccl_p2p *p = mt_xcalloc(1, sizeof *p);
  p->n = mt_nccl_channel_count(g->size);
  const int sides = p->n / 4;
  const int peer_of[2] = {(g->rank + 1) % g->size, (g->rank + g->size - 1) % g->size};
  /* the sender of each channel makes its id; ids travel to the receivers
   * (non-blocking both ways: a ring of blocking exchanges would deadlock) */
  ncclUniqueId id[8];
  MPI_Request rq[4];
  int nrq = 0;
  for (int side = 0; side < sides; side++) {
    for (int par = 0; par < 2; par++) MT_NCCL_CHECK(s->api, GetUniqueId(&id[side * 4 + 2 + par]));
    MT_MPI_CHECK(MPI_Irecv(&id[side * 4], (int)(2 * sizeof(ncclUniqueId)), MPI_BYTE, peer_of[side],
                           ID_TAG, g->comm, &rq[nrq++]));
    MT_MPI_CHECK(MPI_Isend(&id[side * 4 + 2], (int)(2 * sizeof(ncclUniqueId)), MPI_BYTE,
                           peer_of[side], ID_TAG, g->comm, &rq[nrq++]));
  }
  MT_MPI_CHECK(MPI_Waitall(nrq, rq, MPI_STATUSES_IGNORE));
  /* a peer sends this rank exactly one message (next != prev, or one side
   * when size is 2): the ids of its two send channels towards this rank,
   * which are this rank's two receive channels from it, parity in order */
  MT_NCCL_CHECK(s->api, GroupStart());
  for (int k = 0; k < p->n; k++) {
    channel *c = &p->ch[k];
    c->peer = peer_of[k / 4];
    c->is_send = (k & 2) != 0;
    MT_NCCL_CHECK(s->api, CommInitRank(&c->comm, 2, id[k], c->is_send ? 0 : 1));
  }
  MT_NCCL_CHECK(s->api, GroupEnd());
  for (int k = 0; k < p->n; k++) {
    MT_CUDA_CHECK(cudaStreamCreateWithFlags(&p->ch[k].stream, cudaStreamNonBlocking));
    MT_CUDA_CHECK(cudaEventCreateWithFlags(&p->ch[k].ready, cudaEventDisableTiming));
  }
  s->p2p = p;
}

void mt_nccl_p2p_destroy(mt_group *g) {
  mt_nccl_state *s = g->engine_state;
  mt_nccl_p2p *p = s ? s->p2p : NULL;
  if (!p) return;
  for (int k = 0; k < p->n; k++) {
    cudaStreamSynchronize(p->ch[k].stream);
    s->api->CommDestroy(p->ch[k].comm);
    cudaStreamDestroy(p->ch[k].stream);
    cudaEventDestroy(p->ch[k].ready);
  }
  for (int i = 0; i < p->n_free; i++) cudaEventDestroy(p->free_ev[i]);
  free(p->free_ev);
  free(p);
  s->p2p = NULL;
}

void mt_nccl_p2p_abort(mt_group *g) {
  mt_nccl_state *s = g->engine_state;
  mt_nccl_p2p *p = s ? s->p2p : NULL;
  if (!p) return;
  for (int k = 0; k < p->n; k++)
    if (p->ch[k].comm) s->api->CommAbort(p->ch[k].comm);
}

void mt_nccl_post(mt_group *g, mt_request *r) {
  mt_nccl_state *s = g->engine_state;
  if (!s->p2p)
    mt_fatal("group '%s': tagged send/recv over NCCL needs the group's channels "
             "(mt_group_enable_p2p after creating the group)", g->name);
  int k = mt_nccl_channel_slot(g->size, g->rank, r->peer, r->is_send, r->tag);
  if (k < 0)
    mt_fatal("group '%s': tagged send/recv over NCCL between group ranks %d and %d: only ring "
             "neighbours (rank +- 1 mod %d) have channels", g->name, g->rank, r->peer, g->size);
  mt_nccl_p2p *p = s->p2p;
  channel *c = &p->ch[k];
  cudaStream_t compute = mt_nccl_stream(g);
  MT_CUDA_CHECK(cudaEventRecord(c->ready, compute));
  MT_CUDA_CHECK(cudaStreamWaitEvent(c->stream, c->ready, 0));
  if (r->count > 0) { /* both ends skip an empty message (equal counts) */
    if (r->is_send)
      MT_NCCL_CHECK(s->api, Send(r->buf, (size_t)r->count, mt_nccl_dtype(r->dtype), 1, c->comm,
                                 c->stream));
    else
      MT_NCCL_CHECK(s->api, Recv(r->buf, (size_t)r->count, mt_nccl_dtype(r->dtype), 0, c->comm,
                                 c->stream));
  }
  cudaEvent_t done = event_get(p);
  MT_CUDA_CHECK(cudaEventRecord(done, c->stream));
  r->engine_state = (void *)done;
}

int mt_nccl_complete(mt_request *r, int block) {
  mt_group *g = r->g;
  mt_nccl_p2p *p = ((mt_nccl_state *)g->engine_state)->p2p;
  cudaEvent_t done = (cudaEvent_t)r->engine_state;
  if (block) {
    MT_CUDA_CHECK(cudaStreamWaitEvent(mt_nccl_stream(g), done, 0));
  } else {
    cudaError_t e = cudaEventQuery(done);
    if (e == cudaErrorNotReady) return 0;
    MT_CUDA_CHECK(e);
  }
  event_put(p, done); /* a wait already queued keeps the record it saw */
  r->engine_state = NULL;
  return 1;
}

void mt_group_enable_p2p(mt_group *g) {
  if (!g || g->engine != MT_ENGINE_NCCL || g->size < 2) return;
  mt_wd_op_begin(g, MT_WD_CREATE, 0, -1);
  mt_nccl_p2p_create(g);
  mt_wd_op_end(g);
}

#else /* !MT_HAVE_NCCL: NCCL groups cannot exist (their creation is fatal) */

void mt_group_enable_p2p(mt_group *g) { (void)g; }

#endif
