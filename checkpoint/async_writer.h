/* checkpoint/async_writer.h — asynchronous checkpoint saves
 * (checkpoint.async_save, Megatron's --async-save; docs/checkpoint.md
 * "Asynchronous saves"). At the iteration boundary the views' data are
 * copied to a host snapshot (device -> host through the backend), the
 * temporary directory is created (mt_dckpt_save_begin, collective), and a
 * background pthread (niceness +10: training keeps the CPU when both want
 * it) writes this rank's shard file while training goes on.
 * The collective steps (error agreement, index gather, publish by rank 0)
 * run on the main thread at a later iteration boundary once every rank's
 * writer has finished (mt_ckpt_async_poll: one all-reduce of an int per
 * boundary while a save is pending), so MPI is never called from two
 * threads at once. The published files are byte-identical to a
 * synchronous save of the same state. */
#ifndef MT_CHECKPOINT_ASYNC_WRITER_H
#define MT_CHECKPOINT_ASYNC_WRITER_H

#include <stddef.h>

#include "core/backend.h"
#include "parallel/comm.h"
#include "checkpoint/dist_checkpoint.h"

typedef struct mt_ckpt_async mt_ckpt_async;

mt_ckpt_async *mt_ckpt_async_create(void);

/* Allocate (and touch) the host snapshot for `views` ahead of the first
 * save, so that the save iteration does not pay for faulting its pages in
 * (about 1 s per GiB on a loaded host). Optional; no communication. */
void mt_ckpt_async_reserve(mt_ckpt_async *a, const mt_dckpt_view *views, int n_views);

/* Start saving `views` (this rank's, as for mt_dckpt_save; the data are
 * copied before return, so training may change them at once) as
 * meta->iteration under save_dir. A pending save must have been finished
 * (mt_ckpt_async_poll with wait) before. Collective over world (NULL: one
 * process). guard (may be NULL) runs on rank 0 right before the save is
 * published (mt_dckpt_save_set_guard). Returns 0, or -1 with the agreed
 * message (nothing started). */
int mt_ckpt_async_start(mt_ckpt_async *a, const char *save_dir, const mt_dckpt_meta *meta,
                        const char *config_json, mt_backend *be, const mt_dckpt_view *views,
                        int n_views, mt_group *world, mt_dckpt_guard_fn guard, void *guard_ctx,
                        char *err, size_t errlen);

/* At an iteration boundary, on every rank (collective over world when a
 * save is pending, which every rank agrees on). wait = 0: publish the
 * pending save if every rank's writer has finished; wait = 1: wait for the
 * writers, then publish. Returns 0 (nothing to publish / not ready yet),
 * 1 (published: *iteration and *write_s, the background time, are set), or
 * -1 with the agreed message (the save failed: its temporary directory
 * removed, the previous checkpoint and "latest" untouched), or
 * MT_DCKPT_UNREFERENCED (published, "latest" not updated: mt_dckpt_save). */
int mt_ckpt_async_poll(mt_ckpt_async *a, mt_group *world, int wait, int64_t *iteration,
                       double *write_s, char *err, size_t errlen);


/* Join a running writer (without publishing: its temporary directory is
 * removed at the next start of a run that takes the directory's lock) and
 * free everything. No communication. NULL is a no-op. */
void mt_ckpt_async_destroy(mt_ckpt_async *a);

#endif
