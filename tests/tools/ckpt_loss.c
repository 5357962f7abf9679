/* tests/tools/ckpt_loss.c — megatrain's loss on given tokens for the model
 * of a layout-free checkpoint, for the Hugging Face export test
 * (tests/integration/test_hf_convert.sh, against tests/reference/hf_forward.py).
 *
 *   ckpt_loss loss CKPT_DIR TOKENS_FILE
 *       build the model (dense or MoE) of the checkpoint's saved config in
 *       one process (fp32, CPU), load every parameter by name (the fp32
 *       master copy when the checkpoint has one; vocabulary padding rows
 *       zero) and the MoE expert biases when the model has them,
 *       and print the mean token loss (nats, "%.12e") over TOKENS_FILE:
 *       int32 little-endian samples of seq_length + 1 tokens, taken
 *       micro_batch_size at a time, no dropout.
 *   ckpt_loss same CKPT_A CKPT_B
 *       every model tensor (not optimizer state, not the MoE routers' token
 *       counts) of B is in A with the same
 *       shape and the same fp32 bits, and A has no other model tensor; exit 1
 *       naming the first difference (the HF round trip is bitwise).
 *   ckpt_loss init CONFIG OUT_DIR
 *       save the freshly initialised model of CONFIG as a layout-free
 *       checkpoint at iteration 0 (model only), one process.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "core/fileio.h"
#include "tests/tools/tool_util.h"
#include "checkpoint/dist_checkpoint.h"

static const char *const k_one_process[] = {
    "parallel.tensor_model_parallel_size=1", "parallel.pipeline_model_parallel_size=1",
    "parallel.virtual_pipeline_model_parallel_size=null", "parallel.sequence_parallel=false",
    "parallel.num_layers_in_first_pipeline_stage=null",
    "parallel.num_layers_in_last_pipeline_stage=null", "parallel.expert_model_parallel_size=null",
    "parallel.expert_tensor_parallel_size=null", "parallel.context_parallel_size=1",
    "parallel.zero_stage=0"};
#define N_OV ((int)(sizeof k_one_process / sizeof *k_one_process))

/* the model config of a config (dense or MoE), one process
 * (trainer/train_setup.c builds the same for any layout) */
static mt_gpt_config gpt_config(const mt_config *c) {
  const mt_model_config *m = &c->model;
  mt_gpt_config g = {0};
  g.model = *m; /* the model section is the model's config */
  g.tp_size = g.pp_size = g.vpp_size = g.cp_size = g.ep_size = g.etp_size = 1;
  g.padded_vocab_size = mt_config_padded_vocab(c);
  g.micro_batch_size = c->training.micro_batch_size;
  g.seed = c->training.seed;
  return g;
}

static int is_vocab(const char *name) {
  return !strcmp(name, "embedding.word_embeddings.weight") || !strcmp(name, "output_layer.weight");
}

static int cmd_loss(const char *dir, const char *tokens_path) {
  char err[1024];
  mt_dckpt *ck;
  CHECK(mt_dckpt_open(dir, -1, &ck, err, sizeof err) == 0, "ckpt_loss: %s", err);
  mt_config cfg;
  CHECK(!mt_config_load_saved(&cfg, mt_dckpt_config_json(ck), "checkpoint", k_one_process, N_OV,
                               1, err, sizeof err),
        "ckpt_loss: %s", err);
  mt_backend *be = mt_tool_cpu_backend();
  mt_gpt_config gc = gpt_config(&cfg);
  mt_gpt *m = mt_gpt_create(be, &gc);
  gc = *mt_gpt_get_config(m); /* resolved: derived sizes filled */
  const mt_param_list *pl = mt_gpt_params(m);
  float *host = mt_xcalloc((size_t)pl->numel, sizeof(float));
  for (int i = 0; i < pl->n; i++) {
    const mt_param *p = &pl->p[i];
    char master[MT_DCKPT_NAME_MAX + 40];
    snprintf(master, sizeof master, "optimizer.state.fp32_param.%s", p->name);
    const char *src = mt_dckpt_find(ck, master) >= 0 ? master : p->name;
    int k = mt_dckpt_find(ck, src);
    CHECK(k >= 0, "ckpt_loss: checkpoint has no '%s'", p->name);
    int64_t r, c;
    mt_dtype dt;
    mt_dckpt_tensor_shape(ck, k, &r, &c, &dt);
    int64_t want_r = is_vocab(p->name) ? gc.model.vocab_size : p->rows;
    CHECK(r == want_r && c == p->cols, "ckpt_loss: '%s' is [%lld, %lld], model [%lld, %lld]",
          src, (long long)r, (long long)c, (long long)want_r, (long long)p->cols);
    float *t = mt_dckpt_read_tensor(ck, src, MT_F32, err, sizeof err);
    CHECK(t, "ckpt_loss: %s", err);
    memcpy(host + p->offset, t, (size_t)(r * c) * sizeof(float)); /* padding rows stay 0 */
    free(t);
  }
  be->ops->memcpy_h2d(be, mt_gpt_param_buffer(m), host, (size_t)pl->numel * sizeof(float));
  for (int i = 0; i < mt_gpt_num_moe_layers(&gc); i++) {
    float *bias = mt_gpt_moe_expert_bias(m, i);
    if (!bias) continue;
    char nm[192], pre[128]; /* an MTP depth's layer: mtp.layers.k.mtp_model_layer */
    mt_gpt_layer_name(&gc, mt_gpt_moe_layer_is_local(m, i), pre, sizeof pre);
    snprintf(nm, sizeof nm, "%s.mlp.router.expert_bias", pre);
    float *t = mt_dckpt_read_tensor(ck, nm, MT_F32, err, sizeof err);
    CHECK(t, "ckpt_loss: %s", err);
    memcpy(bias, t, (size_t)gc.model.num_experts * sizeof(float));
    free(t);
  }
  size_t len;
  int en;
  int32_t *tok = (int32_t *)mt_read_file(tokens_path, 0, &len, &en);
  CHECK(tok, "ckpt_loss: cannot read %s", tokens_path);
  const int s = gc.model.seq_length, b = gc.micro_batch_size;
  const size_t per = (size_t)b * (size_t)(s + 1);
  const size_t nb = len / sizeof(int32_t) / per;
  CHECK(nb > 0 && len == nb * per * sizeof(int32_t),
        "ckpt_loss: %s holds %zu bytes, not a multiple of %d samples of %d tokens", tokens_path,
        len, b, s + 1);
  double sum = 0;
  int64_t ids[256];
  for (size_t k = 0; k < nb; k++) {
    for (int j = 0; j < b && j < 256; j++) ids[j] = (int64_t)(k * (size_t)b) + j;
    sum += mt_gpt_forward_backward(m, tok + k * per, ids, 0, 1.0f);
  }
  printf("%.12e\n", sum / ((double)nb * b * s));
  free(tok);
  free(host);
  mt_gpt_destroy(m);
  mt_config_free(&cfg);
  mt_dckpt_close(ck);
  return 0;
}

static int cmd_init(const char *config_path, const char *out) {
  char err[1024];
  mt_config cfg;
  CHECK(!mt_config_load(&cfg, config_path, k_one_process, N_OV, 1, err, sizeof err),
        "ckpt_loss: %s", err);
  mt_backend *be = mt_tool_cpu_backend();
  mt_gpt_config gc = gpt_config(&cfg);
  mt_gpt *m = mt_gpt_create(be, &gc);
  const mt_param_list *pl = mt_gpt_params(m);
  float *host = mt_tool_host_params(be, m);
  mt_dckpt_view *v = mt_xcalloc((size_t)pl->n, sizeof *v);
  for (int i = 0; i < pl->n; i++) {
    const mt_param *p = &pl->p[i];
    snprintf(v[i].name, sizeof v[i].name, "%s", p->name);
    v[i].rows = v[i].nr = is_vocab(p->name) ? gc.model.vocab_size : p->rows;
    v[i].cols = v[i].nc = p->cols;
    v[i].hi = v[i].nr * v[i].nc;
    v[i].dtype = MT_F32;
    v[i].host = 1;
    v[i].write = 1;
    v[i].data = host + p->offset;
  }
  mt_dckpt_meta meta = {.seed = cfg.training.seed, .vocab_size = gc.model.vocab_size};
  CHECK(!mt_dckpt_save(out, &meta, cfg.json, NULL, v, pl->n, NULL, err, sizeof err),
        "ckpt_loss: %s", err);
  free(v);
  free(host);
  mt_gpt_destroy(m);
  mt_config_free(&cfg);
  return 0;
}

/* a model tensor: not optimizer state, not the routers' token counts of the
 * last batch (training state the Hugging Face export does not carry) */
static int is_model(const char *name) {
  static const char counts[] = ".mlp.router.tokens_per_expert";
  const size_t n = strlen(name), k = sizeof counts - 1;
  return strncmp(name, "optimizer.", 10) != 0 && !(n > k && !strcmp(name + n - k, counts));
}

static int cmd_same(const char *da, const char *db) {
  char err[1024];
  mt_dckpt *a, *b;
  CHECK(mt_dckpt_open(da, -1, &a, err, sizeof err) == 0, "ckpt_loss: %s", err);
  CHECK(mt_dckpt_open(db, -1, &b, err, sizeof err) == 0, "ckpt_loss: %s", err);
  int n = 0;
  for (int i = 0; i < mt_dckpt_n_tensors(a); i++) n += is_model(mt_dckpt_tensor_name(a, i));
  for (int i = 0; i < mt_dckpt_n_tensors(b); i++) {
    const char *nm = mt_dckpt_tensor_name(b, i);
    if (!is_model(nm)) continue;
    n--;
    int k = mt_dckpt_find(a, nm);
    CHECK(k >= 0, "ckpt_loss same: '%s' only in %s", nm, db);
    int64_t ra, ca, rb, cb;
    mt_dtype ta, tb;
    mt_dckpt_tensor_shape(a, k, &ra, &ca, &ta);
    mt_dckpt_tensor_shape(b, i, &rb, &cb, &tb);
    CHECK(ra == rb && ca == cb, "ckpt_loss same: '%s' is [%lld, %lld] vs [%lld, %lld]", nm,
          (long long)ra, (long long)ca, (long long)rb, (long long)cb);
    float *x = mt_dckpt_read_tensor(a, nm, MT_F32, err, sizeof err);
    CHECK(x, "ckpt_loss: %s", err);
    float *y = mt_dckpt_read_tensor(b, nm, MT_F32, err, sizeof err);
    CHECK(y, "ckpt_loss: %s", err);
    CHECK(!memcmp(x, y, (size_t)(ra * ca) * sizeof(float)), "ckpt_loss same: '%s' differs", nm);
    free(x);
    free(y);
  }
  CHECK(n == 0, "ckpt_loss same: %s has %d model tensors more than %s", da, n, db);
  printf("model tensors of %s and %s are bitwise equal\n", da, db);
  mt_dckpt_close(a);
  mt_dckpt_close(b);
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 4 && !strcmp(argv[1], "same")) return cmd_same(argv[2], argv[3]);
  if (argc == 4 && !strcmp(argv[1], "loss")) return cmd_loss(argv[2], argv[3]);
  if (argc == 4 && !strcmp(argv[1], "init")) return cmd_init(argv[2], argv[3]);
  fprintf(stderr, "usage: ckpt_loss loss CKPT_DIR TOKENS_FILE | same CKPT_A CKPT_B | init CONFIG OUT_DIR\n");
  return 2;
}
