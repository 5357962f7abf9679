/* parallel/dist.c — process runtime: MPI start-up (mpirun, srun --mpi=pmix,
 * or a plain process = world size 1), local rank, abort hook, the world
 * group, bf16 reduction ops and the cross-rank agreement check. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "comm_impl.h"
#include "core/dtype.h"

/* Any mt_fatal on any rank ends the whole job. */
static void abort_job(int code) { MPI_Abort(MPI_COMM_WORLD, code ? code : 1); }

static void bf16_sum_fn(void *in, void *inout, int *len, MPI_Datatype *dt) {
  (void)dt;
  const uint16_t *a = in;
  uint16_t *b = inout;
  for (int i = 0; i < *len; i++)
    b[i] = mt_f32_to_bf16(mt_bf16_to_f32(a[i]) + mt_bf16_to_f32(b[i]));
}

static void bf16_max_fn(void *in, void *inout, int *len, MPI_Datatype *dt) {
  (void)dt;
  const uint16_t *a = in;
  uint16_t *b = inout;
  for (int i = 0; i < *len; i++)
    if (mt_bf16_to_f32(a[i]) > mt_bf16_to_f32(b[i])) b[i] = a[i];
}

mt_dist *mt_dist_init(int *argc, char ***argv) {
  mt_dist *d = mt_xcalloc(1, sizeof(mt_dist));
  int inited = 0, provided = 0;
  MPI_Initialized(&inited);
  if (!inited) {
    /* MPI_THREAD_MULTIPLE: the groups' communication threads (comm_async.c)
     * call MPI beside the compute thread; with less, started collectives
     * run at start (comm.h) */
    if (MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS)
      mt_fatal("MPI_Init_thread failed");
    d->own_mpi = 1;
  } else {
    MPI_Query_thread(&provided);
  }
  const char *ct = getenv("MEGATRAIN_COMM_THREAD");
  if (ct && strcmp(ct, "0") && strcmp(ct, "1"))
    mt_fatal("MEGATRAIN_COMM_THREAD='%s': expected 0 (started collectives run at start) or 1", ct);
  d->thread_multiple = provided >= MPI_THREAD_MULTIPLE && !(ct && !strcmp(ct, "0"));
  mt_sim_link_parse(d, getenv("MEGATRAIN_SIM_LINK"));
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MT_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &d->rank));
  MT_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &d->size));
  mt_set_log_rank(d->rank);
  mt_set_abort_hook(abort_job);

  MPI_Comm local;
  MT_MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, d->rank, MPI_INFO_NULL,
                                   &local));
  MT_MPI_CHECK(MPI_Comm_rank(local, &d->local_rank));
  MT_MPI_CHECK(MPI_Comm_size(local, &d->local_size));
  MPI_Comm_free(&local);

  MT_MPI_CHECK(MPI_Op_create(bf16_sum_fn, 1, &d->bf16_sum));
  MT_MPI_CHECK(MPI_Op_create(bf16_max_fn, 1, &d->bf16_max));
  d->cuda_device = -1;
  d->wd = mt_wd_create(d); /* before the first group: slot 0 is the world */

  int *all = mt_xmalloc(sizeof(int) * (size_t)d->size);
  for (int i = 0; i < d->size; i++) all[i] = i;
  d->world = mt_group_create(d, all, d->size, "world", MT_ENGINE_MPI);
  free(all);
  return d;
}

void mt_dist_finalize(mt_dist *d) {
  if (!d) return;
  mt_group_destroy(d->world);
  mt_wd_destroy(d->wd);
  mt_nccl_api_close(d->nccl); /* after the last group: no communicator left */
  d->nccl = NULL;
  MPI_Op_free(&d->bf16_sum);
  MPI_Op_free(&d->bf16_max);
  if (d->own_mpi) {
    mt_set_abort_hook(NULL);
    MPI_Finalize();
  }
  free(d);
}

int mt_dist_rank(const mt_dist *d) { return d->rank; }
int mt_dist_size(const mt_dist *d) { return d->size; }
int mt_dist_local_rank(const mt_dist *d) { return d->local_rank; }
mt_group *mt_dist_world(mt_dist *d) { return d->world; }
void mt_dist_set_backend(mt_dist *d, mt_backend *be) { d->be = be; }

int mt_dist_check_agree(mt_dist *d, uint64_t value, const char *what, char *err, size_t errlen) {
  uint64_t *all = mt_xmalloc(sizeof(uint64_t) * (size_t)d->size);
  mt_wd_op_begin(d->world, MT_WD_AGREE, (int64_t)sizeof value, -1);
  MT_MPI_CHECK(MPI_Allgather(&value, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, MPI_COMM_WORLD));
  mt_wd_op_end(d->world);
  int bad = 0, first_bad = -1;
  for (int r = 1; r < d->size; r++)
    if (all[r] != all[0]) {
      if (first_bad < 0) first_bad = r;
      bad++;
    }
  if (bad && err && errlen) {
    size_t p = (size_t)snprintf(err, errlen, "%s differs across ranks: rank 0 has 0x%016" PRIx64
                                             "; ranks ", what, all[0]);
    int listed = 0;
    for (int r = 1; r < d->size && p < errlen; r++)
      if (all[r] != all[0]) {
        if (listed == 16) {
          p += (size_t)snprintf(err + p, errlen - p, ",...");
          break;
        }
        p += (size_t)snprintf(err + p, errlen - p, listed ? ",%d" : "%d", r);
        listed++;
      }
    if (p < errlen)
      snprintf(err + p, errlen - p, " have other values (rank %d: 0x%016" PRIx64 ")", first_bad,
               all[first_bad]);
  }
  free(all);
  return bad ? -1 : 0;
}
