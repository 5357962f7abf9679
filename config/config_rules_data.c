/* config/config_rules_data.c — the consistency rules of the data section
 * (one blend or Megatron's per-split blends, tokenizer keys as Megatron's
 * build_tokenizer reads them, the blend surplus), as rows of the rule table
 * that config_check.c runs after the model rules and docs/config.md lists
 * (tests/support/config_doc.c). The tokenizer keys that only apply to one
 * tokenizer type (vocab_file, merge_file, tokenizer_model), the per-split
 * valid/test_data_path (need train_data_path) and split (no effect with
 * it) are the `needs` column of config_table.c (config_needs.c), not rules
 * here. */
#include <stdio.h>
#include <string.h>

#include "config/config_internal.h"

static int key(const char *dotted) { return mt_cfg_find_dotted(dotted); }

static int per_split(const mt_data_config *d) {
  return d->split_blend[0].n_paths || d->split_blend[1].n_paths || d->split_blend[2].n_paths;
}

/* data_path, or Megatron's per-split paths (BlendedMegatronDatasetConfig:
 * blend and blend_per_split exclude each other, and split with them). */
static int r_data_given(mt_cfg_ctx *c, mt_config *cfg, int world) {
  (void)world;
  const mt_data_config *d = &cfg->data;
  if (per_split(d) || d->n_paths) return 0;
  return mt_cfg_fail(c, key("data.data_path"),
                     "required key is missing (expected data.data_path, or "
                     "data.train_data_path with valid_data_path / test_data_path)");
}

static int r_data_one_form(mt_cfg_ctx *c, mt_config *cfg, int world) {
  (void)world;
  const mt_data_config *d = &cfg->data;
  if (!per_split(d) || !d->n_paths) return 0;
  return mt_cfg_fail(c, key("data.train_data_path"),
                     "given together with data.data_path (expected one of the two: one blend "
                     "split by data.split, or one blend per split, as Megatron asserts)");
}

/* HuggingFaceTokenizer and SentencePieceTokenizer read tokenizer_model;
 * without it there is nothing to load (Megatron asserts the same). */
static int r_tokenizer_model(mt_cfg_ctx *c, mt_config *cfg, int world) {
  (void)world;
  const mt_data_config *d = &cfg->data;
  if (!strcmp(d->tokenizer_type, "GPT2BPETokenizer") || d->tokenizer_model[0]) return 0;
  return mt_cfg_fail(c, key("data.tokenizer_type"), "%s needs data.tokenizer_model (the %s)",
                     d->tokenizer_type,
                     strcmp(d->tokenizer_type, "SentencePieceTokenizer")
                         ? "tokenizer.json or the folder holding it"
                         : "SentencePiece tokenizer.model file");
}

/* Megatron builds a surplus of samples only for a weighted blend; another
 * value than the default without one does nothing. */
static int r_blend_surplus(mt_cfg_ctx *c, mt_config *cfg, int world) {
  (void)world;
  const mt_data_config *d = &cfg->data;
  if (d->mid_level_dataset_surplus == 0.005f || d->weighted) return 0;
  return mt_cfg_fail(c, key("data.mid_level_dataset_surplus"),
                     "has no effect without the weighted data_path form (expected "
                     "[w1, \"prefix1\", w2, \"prefix2\", ...]: Megatron builds a surplus only for "
                     "weighted blends)");
}

static const mt_cfg_rule k_data[] = {
    {"data.data_path", r_data_given,
     "`data.data_path` or `data.train_data_path` (Megatron's per-split blends) is given",
     "1: data.data_path=null", 0, 0},
    {"data.train_data_path", r_data_one_form,
     "`data.train_data_path` / `valid_data_path` / `test_data_path` exclude `data_path` (one "
     "blend split by `split`, or one blend per split, as Megatron asserts)",
     "1: data.train_data_path=t", 0, 0},
    {"data.tokenizer_type", r_tokenizer_model,
     "`data.tokenizer_type` `HuggingFaceTokenizer` and `SentencePieceTokenizer` need "
     "`data.tokenizer_model`",
     "1: data.tokenizer_type=HuggingFaceTokenizer", 0, 0},
    {"data.mid_level_dataset_surplus", r_blend_surplus,
     "`data.mid_level_dataset_surplus` other than its default needs the weighted `data_path` "
     "form (`[w1, \"prefix1\", …]`)",
     "1: data.mid_level_dataset_surplus=0.1", 0, 0},
};

const mt_cfg_rule *mt_cfg_rules_data(int *n) {
  *n = (int)(sizeof k_data / sizeof k_data[0]);
  return k_data;
}
