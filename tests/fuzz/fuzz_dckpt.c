/* tests/fuzz/fuzz_dckpt.c — libFuzzer target: the layout-free checkpoint
 * reader (checkpoint/dist_checkpoint_*.c) through its public path.
 *
 * Input: u8 flags, u32 LE n, n bytes of index.bin, the rest = the bytes of
 * every shard file after its 32-byte header. flags bit 0: replace the
 * index's trailing CRC-32 by the right one (so the fuzzer gets past it);
 * bit 1: recompute every piece's block CRCs from the shard bytes (so the
 * copy/convert path runs); bit 2: read tensors as the other float dtype
 * (fp32 <-> bf16 conversion). The harness writes index.bin, a fixed valid
 * metadata.json and one shard_RRRRR.bin per file of the index (at most 4)
 * into a directory under /dev/shm (or $TMPDIR), then mt_dckpt_open and
 * mt_dckpt_read_tensor of every small tensor plus a sub-box view. The index
 * is also validated in memory (mt_dckpt_index_validate) before any file is
 * written. Reader errors are fine; a sanitizer report, a crash or a leak is
 * a bug. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/fuzz/fuzz_scratch.h"
#include "core/fileio.h"
#include "checkpoint/dist_checkpoint.h"
#include "checkpoint/dist_checkpoint_internal.h"

static char g_root[256], g_dir[300];

/* Remove this process's scratch directory at exit. */
static void cleanup(void) {
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_root);
  if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", g_root);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  fuzz_scratch(g_root, sizeof g_root, "fuzz_dckpt", "");
  snprintf(g_dir, sizeof g_dir, "%s/iter_0000001", g_root);
  char cmd[700];
  snprintf(cmd, sizeof cmd, "mkdir -p '%s'", g_dir);
  if (system(cmd) != 0) {
    fprintf(stderr, "fuzz_dckpt: cannot create %s\n", g_dir);
    exit(1);
  }
  atexit(cleanup);
  return 0;
}

static void put_file(const char *name, const void *p, size_t n) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", g_dir, name);
  FILE *f = fopen(path, "wb");
  if (!f) abort();
  if (n) fwrite(p, 1, n, f);
  fclose(f);
}

static const char k_meta[] =
    "{\"format\": \"megatrain-dist-v2\", \"iteration\": 1, \"consumed_samples\": 8, \"step\": 1, "
    "\"skipped_iters\": 0, \"nan_iters\": 0, \"seed\": 1234, \"vocab_size\": 50257, "
    "\"has_optimizer\": true, \"files\": [], \"tensors\": [], \"config\": {\"a\": [1, 2]}}\n";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 5) return 0;
  uint8_t flags = data[0];
  uint32_t n;
  memcpy(&n, data + 1, 4);
  if (n > size - 5) n = (uint32_t)(size - 5);
  const uint8_t *idx = data + 5, *shard = idx + n;
  size_t shard_n = size - 5 - n;
  unsigned char *ib = malloc(n ? n : 1);
  memcpy(ib, idx, n);
  if ((flags & 1) && n >= 4) {
    uint32_t crc = mt_crc32(0, ib, n - 4);
    memcpy(ib + n - 4, &crc, 4);
  }
  char err[1024];
  mt_dckpt_index ix;
  if (mt_dckpt_index_decode(&ix, ib, n, "index.bin", err, sizeof err) == 0) {
    (void)mt_dckpt_index_validate(&ix, "index.bin", err, sizeof err); /* in memory, no files */
    if (flags & 2) { /* block CRCs from the shard bytes the piece lies over */
      for (int i = 0; i < ix.n_p; i++) {
        mt_dckpt_piece *p = &ix.p[i];
        int64_t o = p->offset - MT_DCKPT_SHARD_HEADER;
        if (o < 0 || p->nbytes < 0 || (uint64_t)o > shard_n || (uint64_t)p->nbytes > shard_n - (uint64_t)o)
          continue;
        for (int32_t b = 0; b < p->n_blocks; b++) {
          int64_t s = (int64_t)b * MT_DCKPT_BLOCK;
          if (s >= p->nbytes) break;
          int64_t e = p->nbytes - s < MT_DCKPT_BLOCK ? p->nbytes - s : MT_DCKPT_BLOCK;
          p->crc[b] = mt_crc32(0, shard + o + s, (size_t)e);
        }
      }
      size_t en = 0;
      unsigned char *enc = mt_dckpt_index_encode(&ix, &en);
      free(ib);
      ib = enc;
      n = (uint32_t)en;
    }
    int n_f = ix.n_f;
    int ok_files = n_f <= 4;
    for (int i = 0; i < n_f && ok_files; i++)
      ok_files = ix.f[i].rank >= 0 && ix.f[i].rank < 100000;
    int32_t ranks[4];
    for (int i = 0; i < n_f && ok_files; i++) ranks[i] = ix.f[i].rank;
    mt_dckpt_index_free(&ix);
    if (ok_files) {
      put_file("index.bin", ib, n);
      put_file("metadata.json", k_meta, sizeof k_meta - 1);
      unsigned char *sf = malloc(MT_DCKPT_SHARD_HEADER + shard_n);
      memset(sf, 0, MT_DCKPT_SHARD_HEADER);
      memcpy(sf, MT_DCKPT_SHARD_MAGIC, 8);
      memcpy(sf + MT_DCKPT_SHARD_HEADER, shard, shard_n);
      for (int i = 0; i < n_f; i++) {
        char name[64];
        snprintf(name, sizeof name, "shard_%05d.bin", ranks[i]);
        put_file(name, sf, MT_DCKPT_SHARD_HEADER + shard_n);
      }
      free(sf);
      mt_dckpt *c = NULL;
      if (mt_dckpt_open(g_root, 1, &c, err, sizeof err) == 0) {
        for (int i = 0; i < mt_dckpt_n_tensors(c); i++) {
          int64_t rows, cols;
          mt_dtype dt;
          mt_dckpt_tensor_shape(c, i, &rows, &cols, &dt);
          int64_t numel;
          if (__builtin_mul_overflow(rows, cols, &numel) || numel > (1 << 16)) continue;
          mt_dtype want = dt;
          if ((flags & 4) && (dt == MT_F32 || dt == MT_BF16)) want = dt == MT_F32 ? MT_BF16 : MT_F32;
          void *t = mt_dckpt_read_tensor(c, mt_dckpt_tensor_name(c, i), want, err, sizeof err);
          free(t);
          /* a sub-box view with a flat sub-range (a tensor-parallel box with a ZeRO shard) */
          mt_dckpt_view v = {0};
          snprintf(v.name, sizeof v.name, "%s", mt_dckpt_tensor_name(c, i));
          v.rows = rows;
          v.cols = cols;
          v.r0 = rows / 2;
          v.nr = rows - v.r0;
          v.c0 = (flags & 8) ? cols / 3 : 0;
          v.nc = cols - v.c0;
          v.lo = (flags & 16) && v.nr * v.nc > 0 ? 1 : 0;
          v.hi = v.nr * v.nc - ((flags & 32) && v.nr * v.nc > v.lo ? 1 : 0);
          v.dtype = want;
          v.host = 1;
          v.data = malloc((size_t)(v.hi - v.lo + 1) * 8);
          if (mt_dckpt_load(c, NULL, &v, 1, err, sizeof err) != 0 && t) abort(); /* whole read ok */
          free(v.data);
        }
        mt_dckpt_close(c);
      }
      for (int i = 0; i < n_f; i++) { /* remove, so the next input's files are its own */
        char path[512];
        snprintf(path, sizeof path, "%s/shard_%05d.bin", g_dir, ranks[i]);
        unlink(path);
      }
    }
  }
  free(ib);
  return 0;
}
