/* tests/fuzz/fuzz_legacy.c — libFuzzer target: the reader of the previous
 * per-layout checkpoint format (checkpoint/legacy_reader.c mt_checkpoint_load:
 * mp_rank_TT/model_optim_rng.bin with its records and the "buffer" records
 * of checkpoint/legacy_records.c), still used to resume old checkpoints.
 *
 * Input: u8 flags, then the bytes of model_optim_rng.bin. flags bit 0:
 * replace the trailing CRC-32 by the right one (so the fuzzer gets past it);
 * bit 1: the model is bf16 (records param + exp_avg + exp_avg_sq + master),
 * else fp32 (no master records). The model: two parameters of a tp rank
 * (one a row shard) and one fp32 buffer (an MoE expert bias), on a host
 * "backend" whose copies are memcpy; one process (no communication). The
 * file goes to a directory under /dev/shm (or $TMPDIR). Reader errors are
 * fine; a sanitizer report, a crash or a leak is a bug; a file that loads
 * must give its iteration. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/fuzz/fuzz_scratch.h"
#include "core/fileio.h"
#include "checkpoint/legacy_reader.h"
#include "checkpoint/legacy_records.h"
#include "checkpoint/legacy_zero.h"
#include "tests/support/legacy_writer.h"
#include "optimizer/optimizer.h"

static char g_root[256], g_file[400];

/* parallel/comm.h stand-ins: checkpoint/legacy_format.c agrees over ranks with
 * them; one process here (world NULL), so they are never called. */
void mt_allreduce(mt_group *g, void *buf, int64_t n, mt_dtype dt, mt_redop op) {
  (void)g, (void)buf, (void)n, (void)dt, (void)op;
  abort();
}

int mt_group_rank(const mt_group *g) { /* mt_checkpoint_save only */
  (void)g;
  abort();
}

static void h2d(mt_backend *be, void *dst, const void *src, size_t n) {
  (void)be;
  memcpy(dst, src, n);
}

static mt_backend_ops g_ops;
static mt_backend g_be[2];
static mt_param g_p[2];
static mt_param_list g_pl = {g_p, 2, 2, 32};
static float g_bias[3];
static mt_ckpt_buffer g_buf = {"decoder.layers.0.mlp.router.expert_bias", g_bias, 3, MT_F32};

/* Remove this process's scratch directory at exit. */
static void cleanup(void) {
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_root);
  if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", g_root);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  fuzz_scratch(g_root, sizeof g_root, "fuzz_legacy", "");
  char cmd[600];
  snprintf(cmd, sizeof cmd, "mkdir -p '%s/iter_0000007/mp_rank_01' && echo 7 > '%s/latest_checkpointed_iteration.txt'", g_root, g_root);
  if (system(cmd) != 0) {
    fprintf(stderr, "fuzz_legacy: cannot create %s\n", g_root);
    exit(1);
  }
  snprintf(g_file, sizeof g_file, "%s/iter_0000007/mp_rank_01/model_optim_rng.bin", g_root);
  g_ops.memcpy_h2d = h2d;
  for (int i = 0; i < 2; i++) {
    g_be[i].ops = &g_ops;
    g_be[i].name = "cpu";
    g_be[i].dtype = i ? MT_BF16 : MT_F32;
  }
  g_p[0] = (mt_param){.name = "decoder.layers.0.mlp.linear_fc1.weight", .rows = 8, .cols = 6,
                      .local_rows = 4, .local_cols = 6, .row_offset = 4, .offset = 0, .numel = 24};
  g_p[1] = (mt_param){.name = "decoder.final_layernorm.weight", .rows = 1, .cols = 6,
                      .local_rows = 1, .local_cols = 6, .offset = 24, .numel = 6};
  atexit(cleanup);
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  uint8_t flags = data[0];
  size_t n = size - 1;
  unsigned char *b = malloc(n ? n : 1);
  memcpy(b, data + 1, n);
  if ((flags & 1) && n >= 4) {
    uint32_t crc = mt_crc32(0, b, n - 4);
    memcpy(b + n - 4, &crc, 4);
  }
  FILE *f = fopen(g_file, "wb");
  if (!f) abort();
  if (n) fwrite(b, 1, n, f);
  fclose(f);
  free(b);
  int bf16 = (flags & 2) != 0;
  float param32[32], master[32], m[32], v[32];
  uint16_t param16[32];
  mt_adamw opt;
  memset(&opt, 0, sizeof opt);
  opt.be = &g_be[bf16];
  opt.params = &g_pl;
  opt.param_buf = bf16 ? (void *)param16 : (void *)param32;
  opt.master = bf16 ? master : param32;
  opt.m = m;
  opt.v = v;
  opt.numel = 32;
  mt_ckpt_layout L;
  memset(&L, 0, sizeof L);
  L.tp_rank = 1;
  L.pp_size = 1;
  L.writer = 1;
  L.buffers = &g_buf;
  L.n_buffers = 1;
  mt_ckpt_state st;
  char err[1024];
  if (mt_checkpoint_load(g_root, &st, &opt, &L, err, sizeof err) == 0 && st.iteration != 7) abort();
  return 0;
}
