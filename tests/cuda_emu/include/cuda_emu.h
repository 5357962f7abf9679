/* tests/cuda_emu/include/cuda_emu.h — what the emulated runtime
 * (libcudaemu.so) offers the other stand-ins: the NCCL stand-in
 * (tests/cuda_emu/nccl/, libnccl.so.2) queues its collectives on CUDA
 * streams through mt_emu_enqueue_ext, so that they run when their stream
 * reaches them, in stream order with the kernels and copies, with their
 * device buffers checked and recorded by the cross-stream checker. C
 * interface. */
#ifndef MT_CUDA_EMU_H
#define MT_CUDA_EMU_H

#include <stddef.h>

#include "cuda_runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A device buffer an op reads (write 0) or writes (write 1). */
typedef struct {
  const void *ptr;
  size_t bytes;
  int write;
} mt_emu_range;

/* Queue an op on stream s. When the stream reaches it (every earlier op of
 * s and every event it waits for done) start(ctx) runs: it returns 1 when
 * the op is complete, else poll(ctx) is called at every progress step
 * until it returns 1 (the stream stays blocked meanwhile; a host wait that
 * sees no progress for MT_EMU_HANG_S seconds reports the op by `name`).
 * release(ctx) runs once after completion. Device memory is accessible
 * inside start and poll. The ranges must each lie in one live device
 * allocation (else a fault naming the op). comm: 1 for communication. */
void mt_emu_enqueue_ext(cudaStream_t s, const char *name, const mt_emu_range *ranges, int nranges,
                        int (*start)(void *ctx), int (*poll)(void *ctx),
                        void (*release)(void *ctx), void *ctx, int comm);

/* The host waits until done(ctx) returns 1, running device work meanwhile
 * (and reporting a hang naming `what` after MT_EMU_HANG_S seconds without
 * any progress). */
void mt_emu_host_wait(int (*done)(void *ctx), void *ctx, const char *what);

/* Current device of the process (cudaSetDevice) and the emulated device
 * count. */
int mt_emu_device(void);

/* A device fault found by a stand-in: "cuda-emu [rank R]: ERROR: ...",
 * then abort. */
void mt_emu_fault(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
/* One line on stderr, "cuda-emu [rank R]: ...". */
void mt_emu_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Seconds of the host wait after which a wait without progress is a hang. */
double mt_emu_hang_seconds(void);

#ifdef __cplusplus
}
#endif

#endif
