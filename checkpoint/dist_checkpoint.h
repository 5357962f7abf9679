/* checkpoint/dist_checkpoint.h — the layout-free checkpoint (Megatron
 * dist-checkpointing's ShardedTensor idea: every stored piece says which
 * part of which global tensor it is), so a run resumes under any tp, pp
 * (interleaved, uneven), dp, ep, etp, cp, zero_stage and vocabulary padding.
 * docs/checkpoint.md describes the files and the resharding rules.
 *
 * Model of the data. A checkpoint holds named GLOBAL 2-D tensors [rows, cols]
 * (1-D tensors are [1, n]) of dtype fp32, bf16 or int64:
 *  - model parameters under Megatron's names
 *    ("decoder.layers.3.self_attention.linear_qkv.weight"; expert tensors
 *    per global expert "decoder.layers.3.mlp.experts.5.linear_fc1.weight"),
 *    the word embedding / output layer with the REAL vocabulary rows only
 *    (padding removed: rows = vocab_size);
 *  - optimizer state in the same per-parameter model space, named as
 *    Megatron's dist-ckpt does: "optimizer.state.exp_avg.<param>",
 *    "optimizer.state.exp_avg_sq.<param>" and, when parameters are stored in
 *    a lower precision than fp32, "optimizer.state.fp32_param.<param>";
 *  - persistent buffers (MoE expert bias, tokens per expert: "…router.expert_bias").
 * The scalars (iteration, consumed samples, optimizer step, counters, seed)
 * live in the metadata. RNG needs nothing (counter-based, docs/rng.md).
 *
 * A rank describes the part of a global tensor it holds in memory as a VIEW:
 * a box [r0, r0 + nr) x [c0, c0 + nc) of the global tensor, laid out
 * row-major (nr * nc elements), of which the view holds the elements
 * [lo, hi) of that row-major order (a ZeRO shard holds a flat sub-range of
 * its rank's tensor-parallel box; a whole box has lo = 0, hi = nr * nc).
 * `data` points at element lo. A SwiGLU fc1 shard (mt_param.halves) is two
 * views, one per half; the caller cuts the vocabulary padding off (box rows
 * clipped to rows < vocab_size, hi clipped to the clipped box).
 *
 * Saving: every rank passes all its views; those with `write` set are the
 * pieces it stores (the caller sets write on exactly one holder of every
 * element: replicas are written once). Each rank writes its pieces into its
 * own file (no gather of data); only the small piece index is gathered to
 * rank 0, which writes the index and metadata.json. Writes are atomic (a
 * temporary directory renamed when every rank has finished, then
 * latest_checkpointed_iteration.txt replaced by rename) and checksummed
 * (CRC-32 of every 1 MiB block of every piece, so a partial read is
 * verified too; CRC of the index).
 *
 * Loading: every rank opens the checkpoint (metadata + index), then fills
 * its views from the stored pieces that overlap them, reading only those
 * byte ranges (pread) and verifying their block checksums; values are
 * converted between fp32 and bf16 when the view's dtype differs from the
 * stored one (round to nearest even). The caller agrees on errors across
 * ranks.
 */
#ifndef MT_CHECKPOINT_DIST_CHECKPOINT_H
#define MT_CHECKPOINT_DIST_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#include "core/backend.h"
#include "core/dtype.h"
#include "parallel/comm.h"
#include "checkpoint/state.h"

#define MT_DCKPT_NAME_MAX 192
#define MT_DCKPT_FORMAT "megatrain-dist-v2" /* metadata.json "format" */

/* One view of (part of) a global tensor in this rank's memory (see above). */
typedef struct {
  char name[MT_DCKPT_NAME_MAX]; /* global key */
  int64_t rows, cols;           /* global shape as stored (vocabulary padding removed) */
  int64_t r0, c0, nr, nc;       /* the box (row-major layout of the memory) */
  int64_t lo, hi;               /* elements [lo, hi) of the box held; 0 <= lo <= hi <= nr*nc */
  mt_dtype dtype;               /* of the memory: MT_F32, MT_BF16 or MT_I64 */
  void *data;                   /* element lo; device memory of `be` (host when be is NULL or
                                   host is set) */
  int host;                     /* data is host memory whatever be is (MoE buffers) */
  int write;                    /* save: this rank stores these elements */
} mt_dckpt_view;

/* The scalars of a checkpoint (metadata.json). */
typedef struct {
  int64_t iteration;        /* last completed iteration (0 for an imported model) */
  int64_t consumed_samples; /* data-loader position */
  int64_t step;             /* optimizer updates applied (Adam bias correction) */
  int64_t skipped_iters, nan_iters;
  uint64_t seed;            /* training.seed */
  int64_t vocab_size;       /* real vocabulary rows kept */
  int has_optimizer;        /* 0: model only (convert --from hf), loads only with finetune */
  mt_ckpt_sched sched;      /* "opt_param_scheduler" (present 0: none) */
} mt_dckpt_meta;

/* Save `views` (n of them, this rank's) as iteration meta->iteration under
 * save_dir (begin + write + finish below): SAVE/iter_NNNNNNN/{metadata.json, index.bin, shard_RRRRR.bin}
 * (one shard file per rank of `world` that writes anything). config_json
 * (may be NULL) is stored in metadata.json as "config". Every view with
 * write set is stored; writing the same element twice, or leaving an
 * element of a tensor that some rank has a view of unwritten, is a caller
 * bug: rank 0 checks the gathered index before publishing and the save
 * fails naming the tensor and the element (load checks it again). Every
 * rank gets the message of the lowest failing rank. Returns 0, or -1 with a message
 * naming the path and the error; on failure the previous checkpoint and
 * "latest" are untouched and the temporary directory is removed. One
 * failure leaves more behind and says so: MT_DCKPT_UNREFERENCED when the
 * iteration was published complete (SAVE/iter_NNNNNNN/) but
 * latest_checkpointed_iteration.txt could not be updated (a full disk); the
 * message names both paths, the error and the iteration "latest" still names
 * (fault injection: checkpoint_latest_enospc:N).
 * Collective over `world` (NULL: one process). Device memory is copied to
 * the host through `be` (NULL: views are host memory). */
#define MT_DCKPT_UNREFERENCED (-2)
int mt_dckpt_save(const char *save_dir, const mt_dckpt_meta *meta, const char *config_json,
                  mt_backend *be, const mt_dckpt_view *views, int n_views, mt_group *world,
                  char *err, size_t errlen);

/* mt_dckpt_save in three phases, for asynchronous saves
 * (checkpoint/async_writer.h): the collective steps run on the calling (main)
 * thread, the file writing anywhere.
 *  begin  (collective over world): rank 0 creates the temporary directory
 *         SAVE/iter_NNNNNNN.tmp.<host>.<pid> (rank 0's host and pid,
 *         broadcast: unique to the run, so another run's temporary directory
 *         is never touched) and the views are checked; meta and config_json
 *         are copied. -1 with the agreed message (nothing left behind).
 *  write  (no communication; any thread): this rank's shard file from
 *         `views` (device memory through be; NULL: host memory), which must
 *         describe the same pieces as at begin. A write, fsync or close
 *         error (ENOSPC, EIO, EACCES…) is kept for finish (-1 returned).
 *         Fault injection (core/failpoint.h): checkpoint_write:N (half the
 *         file, then SIGKILL), checkpoint_enospc:N / checkpoint_eio:N (the
 *         write past half the file fails with ENOSPC / EIO),
 *         checkpoint_stall:N (sleeps 60 s before writing).
 *  finish (collective): agree on the write errors (the message of the
 *         lowest failing rank names the path and the error), gather the
 *         piece index, rank 0 validates it and publishes (metadata,
 *         rename, latest). On a failure before the rename the temporary
 *         directory is removed and the previous checkpoint and "latest" are
 *         untouched (-1); after it, MT_DCKPT_UNREFERENCED as mt_dckpt_save.
 *         Frees p.
 * abandon: free p without publishing (its temporary directory stays, removed
 * at the next start of a run that takes the directory's lock). */
typedef struct mt_dckpt_pending mt_dckpt_pending;
int mt_dckpt_save_begin(const char *save_dir, const mt_dckpt_meta *meta, const char *config_json,
                        const mt_dckpt_view *views, int n_views, mt_group *world,
                        mt_dckpt_pending **out, char *err, size_t errlen);
int mt_dckpt_save_write(mt_dckpt_pending *p, int rank, mt_backend *be, const mt_dckpt_view *views,
                        int n_views);
int mt_dckpt_save_finish(mt_dckpt_pending *p, mt_group *world, char *err, size_t errlen);
void mt_dckpt_save_abandon(mt_dckpt_pending *p);
/* The iteration p saves. */
int64_t mt_dckpt_pending_iteration(const mt_dckpt_pending *p);
/* A check that rank 0 runs in finish right before publishing (before any
 * rename into save_dir or "latest"): 0 to publish, or -1 with a message, and
 * the save fails as any other (temporary directory removed, nothing
 * published). The trainer passes mt_ckpt_lock_verify: a run that no longer
 * owns the directory does not publish into it. */
typedef int (*mt_dckpt_guard_fn)(void *ctx, char *err, size_t errlen);
void mt_dckpt_save_set_guard(mt_dckpt_pending *p, mt_dckpt_guard_fn fn, void *ctx);

typedef struct mt_dckpt mt_dckpt; /* an opened checkpoint: metadata and piece index */

/* Open iteration `iteration` under load_dir (-1: the one named by
 * latest_checkpointed_iteration.txt): read metadata.json and index.bin,
 * verify the index checksum, that every listed shard file exists and is
 * long enough, and that every tensor's pieces cover it exactly once.
 * Returns 0 and *out, or -1 with a message (missing/unreadable file named,
 * truncated piece named with its tensor). Returns 1 (no message) when the
 * directory holds a checkpoint of the previous per-layout format
 * (mp_rank_*), which checkpoint/legacy_format.h still loads under the layout that
 * wrote it. No communication. */
int mt_dckpt_open(const char *load_dir, int64_t iteration, mt_dckpt **out, char *err,
                  size_t errlen);
void mt_dckpt_close(mt_dckpt *c);

const mt_dckpt_meta *mt_dckpt_meta_of(const mt_dckpt *c);
/* The resolved config JSON saved with it ("null" if none); owned by c. */
const char *mt_dckpt_config_json(const mt_dckpt *c);
/* The checkpoint directory opened (…/iter_NNNNNNN). */
const char *mt_dckpt_dir(const mt_dckpt *c);

/* Tensors stored, in index order: count, and per index its name, global
 * shape and stored dtype. */
int mt_dckpt_n_tensors(const mt_dckpt *c);
const char *mt_dckpt_tensor_name(const mt_dckpt *c, int i);
void mt_dckpt_tensor_shape(const mt_dckpt *c, int i, int64_t *rows, int64_t *cols,
                           mt_dtype *dtype);
/* Index of tensor `name`, or -1. */
int mt_dckpt_find(const mt_dckpt *c, const char *name);
/* 1 when a view loaded by mt_dckpt_load touched tensor i (the trainer
 * reduces these flags over ranks to name checkpoint tensors the model does
 * not have). */
int mt_dckpt_tensor_used(const mt_dckpt *c, int i);

/* Fill every view from the checkpoint. First checks all of them: a view's
 * tensor missing from the checkpoint, or stored with another global shape,
 * is refused naming the tensor and both shapes ("checkpoint tensor 'X' is
 * [a, b] but the model built from the config has [c, d]"), as is a dtype
 * that cannot be converted; nothing is written then. Then reads the
 * overlapping byte ranges of the stored pieces, verifies their checksums
 * (a mismatch names the file and the tensor) and copies (converting
 * fp32 <-> bf16) into the views through `be` (NULL: host memory). Every
 * element of every view must be covered (else the tensor and the number of
 * missing elements are named). Returns 0 or -1 with a message; after a
 * read or checksum error the views may be partly filled (the caller stops).
 * Reads go through a bounded host buffer (16 MiB per view at most). No
 * communication. */
int mt_dckpt_load(mt_dckpt *c, mt_backend *be, const mt_dckpt_view *views, int n_views,
                  char *err, size_t errlen);

/* Whole tensor `name` as host memory of dtype `dtype` (fp32/bf16/int64;
 * converted fp32 <-> bf16), [rows * cols] malloc'ed (free()); for the
 * converters and tools. NULL with a message when absent or unreadable. */
void *mt_dckpt_read_tensor(mt_dckpt *c, const char *name, mt_dtype dtype, char *err,
                           size_t errlen);

/* Iteration named by dir/latest_checkpointed_iteration.txt, or -1. */
int64_t mt_dckpt_latest(const char *dir);

#endif
