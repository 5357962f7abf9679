/* checkpoint/legacy_zero.c — reading the ZeRO shard files of the previous
 * checkpoint format (see legacy_zero.h; the file layout below is
 * checkpoint/legacy_format.h's).
 *
 * Every data-parallel rank r writes mp_rank_TT[_PPP]/distrib_optim_dp{r:03d}.bin
 * (Megatron's distrib_optim.pt, one file per rank instead of a gathered one):
 *   "MTZERO\0\1", u32 version, u32 zero_stage, u32 dp, u32 dp_rank,
 *   u32 dtype (T), u32 has_master, i64 flat_numel, i64 shard_numel,
 *   i64 bucket_size, i64 iteration, consumed_samples, step, skipped_iters,
 *   nan_iters, u64 seed, then the shard buffers: parameters (T), exp_avg,
 *   exp_avg_sq, [master] (fp32), each shard_numel elements, then a CRC-32.
 * With expert parameters (MoE: a second part sharded over the expert-data-
 * parallel group) the version is 3, the header is followed by the expert
 * layout: u32 edp, edp_rank, etp, etp_rank, ep, ep_rank, i64 expert
 * shard_numel, and the dense shards by the expert part's parameter, exp_avg,
 * exp_avg_sq, [master] shards. (Version 2, still read, had only u32 edp,
 * edp_rank, i64 shard_numel; it was written with etp 1 only.) etp and ep are
 * recorded because edp and the shard size alone do not fix them: etp 2 x ep 1
 * and etp 1 x ep 2 give expert shards of one size. Every rank writes its own
 * file (its dense and expert shards), so any tp/ep/etp/dp layout saves. The
 * union of the parameter shards is the full parameter buffer (every stage),
 * so the file set is the whole training state. Loading requires the same
 * zero_stage, dp, expert layout (etp, ep, edp and this rank's coordinates),
 * bucket size and model (no cross-layout resharding).
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/util.h"
#include "checkpoint/legacy_records.h"
#include "checkpoint/legacy_zero.h"

mt_legacy_zexp mt_legacy_zero_exp(const mt_zero_opt *z, const mt_zero_part *X) {
  mt_legacy_zexp x = {.edp = (uint32_t)X->L.dp, .edp_rank = (uint32_t)X->L.dp_rank,
            .etp = (uint32_t)z->g.etp, .etp_rank = (uint32_t)z->g.etp_rank,
            .ep = (uint32_t)z->g.ep, .ep_rank = (uint32_t)z->g.ep_rank,
            .shard_numel = X->L.shard_numel};
  return x;
}

/* Appends ", NAME saved A, now B" to the list in buf when a != b. */
static void diff_i64(char *buf, size_t n, const char *name, long long a, long long b) {
  size_t l = strlen(buf);
  if (a != b && l < n)
    snprintf(buf + l, n - l, "%s%s saved %lld, this run %lld", l ? "; " : "", name, a, b);
}

void mt_legacy_zero_shard_path(char *out, size_t n, const char *mp_dir, int dp_rank) {
  snprintf(out, n, "%s/distrib_optim_dp%03d.bin", mp_dir, dp_rank);
}

size_t mt_legacy_zero_part_bytes(const mt_zero_opt *z, const mt_zero_part *P) {
  size_t sn = (size_t)P->L.shard_numel;
  return sn * mt_dtype_size(z->be->dtype) + sn * sizeof(float) * (P->master ? 3 : 2);
}

static const unsigned char *get_part(mt_zero_opt *z, mt_zero_part *P, const unsigned char *p) {
  mt_backend *be = z->be;
  const int64_t sn = P->L.shard_numel;
  const size_t es = mt_dtype_size(be->dtype), fb = (size_t)sn * sizeof(float);
  if (z->o.stage == 3) {
    be->ops->memcpy_h2d(be, P->param_shard, p, (size_t)sn * es);
  } else { /* owned pieces into the full buffer; mt_zero_opt_sync_params gathers the rest */
    char *flat = mt_gpt_param_buffer(z->model);
    for (int b = 0; b < P->L.n_bkt; b++) {
      int64_t lo, hi;
      mt_zero_owned_range(&P->L, b, P->L.dp_rank, &lo, &hi);
      if (hi > lo)
        be->ops->memcpy_h2d(be, flat + (size_t)lo * es, p + (size_t)P->L.bkt[b].shard_offset * es,
                            (size_t)(hi - lo) * es);
    }
  }
  p += (size_t)sn * es;
  be->ops->memcpy_h2d(be, P->m, p, fb);
  p += fb;
  be->ops->memcpy_h2d(be, P->v, p, fb);
  p += fb;
  if (P->master) {
    be->ops->memcpy_h2d(be, P->master, p, fb);
    p += fb;
  }
  return p;
}

/* This rank's shard file `path` is missing: report what the checkpoint's
 * other files record (a non-ZeRO model_optim_rng.bin, or the zero_stage
 * and data-parallel size in the header of distrib_optim_dp000.bin); with
 * neither, keep the open error already in err. */
static void explain_missing(const mt_zero_opt *z, const char *mp_dir, const char *path,
                            char *err, size_t errlen) {
  const mt_zero_part *D = &z->part[0];
  char other[4700];
  snprintf(other, sizeof other, "%s/model_optim_rng.bin", mp_dir);
  if (access(other, F_OK) == 0) {
    snprintf(err, errlen,
             "checkpoint '%s' was saved without ZeRO (it holds model_optim_rng.bin, no "
             "distrib_optim_dp*.bin) but this run has parallel.zero_stage %d; resume with the "
             "zero_stage and data-parallel size it was saved with",
             mp_dir, z->o.stage);
    return;
  }
  snprintf(other, sizeof other, "%s/distrib_optim_dp000.bin", mp_dir);
  FILE *f = fopen(other, "rb");
  if (!f) return;
  mt_legacy_zhdr h;
  int ok = fread(&h, sizeof h, 1, f) == 1 && memcmp(h.magic, MT_LEGACY_ZMAGIC, 8) == 0;
  fclose(f);
  if (ok && ((int)h.dp != D->L.dp || (int)h.stage != z->o.stage))
    snprintf(err, errlen,
             "'%s' is missing: the checkpoint was saved with parallel.zero_stage %u and "
             "data-parallel size %u (header of distrib_optim_dp000.bin) but this run has "
             "zero_stage %d and dp %d; ZeRO checkpoints resume only with the layout they were "
             "saved with",
             path, h.stage, h.dp, z->o.stage, D->L.dp);
  else if (ok)
    snprintf(err, errlen,
             "'%s' is missing (expected one shard file per data-parallel rank: "
             "distrib_optim_dp000.bin records data-parallel size %u, as this run has)",
             path, h.dp);
}

int mt_zero_ckpt_load(void *ctx, mt_ckpt_state *st, const char *mp_dir, char *err,
                      size_t errlen) {
  mt_zero_opt *z = ctx;
  mt_backend *be = z->be;
  mt_zero_part *D = &z->part[0], *X = z->n_part > 1 ? &z->part[1] : NULL;
  char path[4600];
  mt_legacy_zero_shard_path(path, sizeof path, mp_dir, D->L.dp_rank);
  size_t n = 0;
  unsigned char *data = mt_ckpt_read_with_crc(path, &n, err, errlen);
  if (!data) {
    /* the file exists: its read / checksum error stands (never replaced by
     * a guess); it is missing: say what the files that are there record */
    if (access(path, F_OK) == 0) return -1;
    explain_missing(z, mp_dir, path, err, errlen);
    return -1;
  }
  int rc = -1;
  mt_legacy_zhdr h;
  const int64_t sn = D->L.shard_numel;
  if (n < sizeof h || memcmp(data, MT_LEGACY_ZMAGIC, 8) != 0) {
    snprintf(err, errlen, "'%s' is not a megatrain ZeRO shard file (bad magic)", path);
    goto out;
  }
  memcpy(&h, data, sizeof h);
  if (h.version != MT_LEGACY_ZVERSION && h.version != MT_LEGACY_ZVERSION_MOE2 && h.version != MT_LEGACY_ZVERSION_MOE) {
    snprintf(err, errlen,
             "'%s' has ZeRO shard format version %u, this megatrain reads %u, %u and %u", path,
             h.version, MT_LEGACY_ZVERSION, MT_LEGACY_ZVERSION_MOE2, MT_LEGACY_ZVERSION_MOE);
    goto out;
  }
  if ((int)h.stage != z->o.stage || (int)h.dp != D->L.dp) {
    snprintf(err, errlen,
             "checkpoint '%s' was saved with parallel.zero_stage %u and data-parallel size %u "
             "but this run has zero_stage %d and dp %d; ZeRO checkpoints resume only with the "
             "same layout (checkpoints of this per-layout format, written before the layout-free one, are not cut again: load it under the layout that wrote it, or turn it into a layout-free one there with megatrain convert --upgrade)",
             mp_dir, h.stage, h.dp, z->o.stage, D->L.dp);
    goto out;
  }
  const int saved_exp = h.version != MT_LEGACY_ZVERSION;
  if (saved_exp != (X != NULL)) {
    snprintf(err, errlen,
             "'%s' (format version %u) holds %s but this run has %s on this rank (expected a "
             "file saved with the same model and layout)",
             path, h.version, saved_exp ? "expert-parameter shards" : "no expert-parameter shards",
             X ? "expert parameters" : "no expert parameters");
    goto out;
  }
  size_t xsize = !X ? 0 : h.version == MT_LEGACY_ZVERSION_MOE2 ? sizeof(mt_legacy_zexp2) : sizeof(mt_legacy_zexp);
  if (X) {
    mt_legacy_zexp x = {0}, now = mt_legacy_zero_exp(z, X);
    int known = n >= sizeof h + xsize; /* else the size check below reports it */
    if (known && h.version == MT_LEGACY_ZVERSION_MOE2) { /* written with etp 1, ep not recorded */
      mt_legacy_zexp2 x2;
      memcpy(&x2, data + sizeof h, sizeof x2);
      x = (mt_legacy_zexp){.edp = x2.edp, .edp_rank = x2.edp_rank, .etp = 1, .etp_rank = 0,
                 .ep = now.ep, .ep_rank = now.ep_rank, .shard_numel = x2.shard_numel};
    } else if (known) {
      memcpy(&x, data + sizeof h, sizeof x);
    }
    if (known && (x.edp != now.edp || x.edp_rank != now.edp_rank || x.etp != now.etp ||
                  x.etp_rank != now.etp_rank || x.ep != now.ep || x.ep_rank != now.ep_rank ||
                  x.shard_numel != now.shard_numel)) {
      snprintf(err, errlen,
               "checkpoint '%s' was saved with the expert layout "
               "expert_tensor_parallel_size %u x expert_model_parallel_size %u x "
               "expert-data-parallel %u (this rank: etp rank %u, ep rank %u, edp rank %u, expert "
               "shard %lld elements%s) but this run has etp %u x ep %u x edp %u (etp rank %u, "
               "ep rank %u, edp rank %u, shard %lld); ZeRO checkpoints resume only with the "
               "layout they were saved with (checkpoints of this per-layout format, written before the layout-free one, are not cut again: load it under the layout that wrote it, or turn it into a layout-free one there with megatrain convert --upgrade)",
               mp_dir, x.etp, x.ep, x.edp, x.etp_rank, x.ep_rank, x.edp_rank,
               (long long)x.shard_numel,
               h.version == MT_LEGACY_ZVERSION_MOE2
                   ? "; format version 2: written with etp 1, ep not recorded, shown as this run's"
                   : "",
               now.etp, now.ep, now.edp, now.etp_rank, now.ep_rank,
               now.edp_rank, (long long)now.shard_numel);
      goto out;
    }
  }
  if ((int)h.dp_rank != D->L.dp_rank || h.flat_numel != D->L.flat_numel ||
      h.shard_numel != sn || h.bucket_size != D->L.bucket_size ||
      h.dtype != (uint32_t)be->dtype || h.has_master != (D->master != NULL)) {
    char d[512] = "";
    diff_i64(d, sizeof d, "data-parallel rank", h.dp_rank, D->L.dp_rank);
    diff_i64(d, sizeof d, "parameters (flat buffer elements)", h.flat_numel, D->L.flat_numel);
    diff_i64(d, sizeof d, "dense shard elements", h.shard_numel, sn);
    diff_i64(d, sizeof d, "bucket size", h.bucket_size, D->L.bucket_size);
    diff_i64(d, sizeof d, "fp32 master copy (0/1)", h.has_master, D->master != NULL);
    if (h.dtype != (uint32_t)be->dtype) {
      size_t l = strlen(d);
      snprintf(d + l, sizeof d - l, "%sparameter dtype saved %s, this run %s", l ? "; " : "",
               mt_dtype_name((mt_dtype)h.dtype), mt_dtype_name(be->dtype));
    }
    snprintf(err, errlen,
             "'%s' does not match this run's ZeRO shard layout: %s (expected equal: a ZeRO "
             "checkpoint resumes only with the model, parallel.ddp_bucket_size and "
             "training.precision it was saved with)",
             path, d);
    goto out;
  }
  size_t want = sizeof h + mt_legacy_zero_part_bytes(z, D) + (X ? xsize + mt_legacy_zero_part_bytes(z, X) : 0);
  if (n != want) {
    snprintf(err, errlen,
             "'%s' holds %zu bytes before its CRC but its header describes %zu (expected equal)",
             path, n, want);
    goto out;
  }
  const unsigned char *p = get_part(z, D, data + sizeof h + xsize);
  if (X) get_part(z, X, p);
  z->step = h.step;
  st->iteration = h.iteration;
  st->consumed_samples = h.consumed_samples;
  st->skipped_iters = h.skipped_iters;
  st->nan_iters = h.nan_iters;
  st->seed = h.seed;
  rc = 0;
out:
  free(data);
  return rc;
}
