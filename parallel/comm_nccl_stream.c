/* parallel/comm_nccl_stream.c — what every NCCL call of a group shares: the
 * CUDA stream it is issued on (the backend's compute stream) and the NCCL datatype of each dtype. Shared by the collectives (comm_nccl.c) and the
 * p2p channels (comm_nccl_p2p.c); its own file so those two do not call
 * each other. Empty without MT_HAVE_NCCL. */
#include "comm_impl.h"

#ifdef MT_HAVE_NCCL
#include "../core/backend.h"
#include "comm_nccl_impl.h"

cudaStream_t mt_nccl_stream(const mt_group *g) {
  const mt_backend *be = g->d->be;
  return be ? (cudaStream_t)be->stream : NULL;
}

ncclDataType_t mt_nccl_dtype(mt_dtype t) {
  switch (t) {
    case MT_F32: return ncclFloat32;
    case MT_BF16: return ncclBfloat16;
    case MT_I32: return ncclInt32;
    case MT_I64: return ncclInt64;
    case MT_F64: return ncclFloat64;
    case MT_U8: return ncclUint8;
  }
  mt_fatal("unknown dtype %d", (int)t);
}
#else
typedef int mt_comm_nccl_stream_unused; /* ISO C: no empty translation unit */
#endif
