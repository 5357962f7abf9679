/* tools/hf_tokenizer_files.h — the tokenizer files that travel with a
 * Hugging Face model directory (tokenizer.json, tokenizer_config.json,
 * special_tokens_map.json, tokenizer.model): found, copied beside an
 * imported checkpoint (`convert --from hf`) or into an exported model
 * (`convert --to hf`), and looked up by `generate`. */
#ifndef MT_TOOLS_HF_TOKENIZER_FILES_H
#define MT_TOOLS_HF_TOKENIZER_FILES_H

#include <stddef.h>

/* The tokenizer a directory holds: HuggingFaceTokenizer when it has a
 * tokenizer.json (model = the directory), else SentencePieceTokenizer with
 * a tokenizer.model (model = that file). 1 found, 0 none. */
int mt_hf_tokenizer_find(const char *dir, char *type, size_t type_len, char *model,
                         size_t model_len);

/* Copy the tokenizer files present in from_dir into to_dir; the number
 * copied, or -1 with a message. */
int mt_hf_tokenizer_copy(const char *from_dir, const char *to_dir, char *err, size_t errlen);

/* The directory of a tokenizer_model path (the path itself when it is a
 * directory, else its parent) into out. */
void mt_hf_tokenizer_dir(const char *model, char *out, size_t out_len);

#endif
