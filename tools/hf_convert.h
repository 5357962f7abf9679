/* tools/hf_convert.h — `megatrain convert` between the layout-free
 * checkpoint (checkpoint/dist_checkpoint.h) and a Hugging Face model directory
 * (model.safetensors or shards + index, config.json), GPT-2 or Llama naming
 * (tools/hf_map.h). One process, host memory, no communication. Nothing is
 * left half-written: the export is built in a temporary sibling directory
 * renamed at the end, the import validates every tensor before the
 * checkpoint is written (atomically, by mt_dckpt_save). An output directory
 * that exists and is not empty is refused.
 */
#ifndef MT_TOOLS_HF_CONVERT_H
#define MT_TOOLS_HF_CONVERT_H

#include <stddef.h>
#include <stdint.h>

/* Export the checkpoint under load_dir (its latest iteration) to out_dir:
 * the model of its saved config, parameters from the fp32 master copy when
 * the checkpoint has one ("optimizer.state.fp32_param.<name>"), stored as
 * bf16 (round to nearest even) or fp32; model.safetensors sharded above
 * max_shard_bytes (0: never). Returns 0, 1 (bad checkpoint or a model no
 * naming expresses) or 2 (usage), with a message in err. */
int mt_hf_export_dir(const char *load_dir, const char *out_dir, int bf16, uint64_t max_shard_bytes,
                     char *err, size_t errlen);

/* Import the Hugging Face model in in_dir as a checkpoint at iteration 0
 * (model only: has_optimizer 0, fp32 tensors) under out_dir, for the model of
 * the megatrain config file config_path (which fixes the naming and every
 * shape; saved in the checkpoint with its parallel section reset to one
 * process). Every expected tensor must be present with its shape and a float
 * dtype (F32, BF16, F16); config.json, when present, must agree with the
 * config; a tensor the model has no place for is refused (except the
 * attention-mask and rotary buffers older exports carry, and a tied lm_head
 * equal to the embedding). Returns 0, 1 (bad input) or 2 (bad config or
 * usage) with a message in err. */
int mt_hf_import_dir(const char *in_dir, const char *out_dir, const char *config_path, char *err,
                     size_t errlen);

#endif
