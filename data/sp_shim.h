/* data/sp_shim.h — a C interface to Debian's libsentencepiece (Kudo &
 * Richardson 2018), the SentencePiece library itself: data/sp_shim.cc wraps
 * sentencepiece::SentencePieceProcessor. Used for Megatron's
 * SentencePieceTokenizer (`tokenizer_type` SentencePieceTokenizer; Llama 2,
 * Mistral `tokenizer.model`). The model is read-only after loading;
 * mt_sp_encode may run from several threads at once. */
#ifndef MT_DATA_SP_SHIM_H
#define MT_DATA_SP_SHIM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mt_sp mt_sp;

/* Load a serialized ModelProto (`tokenizer.model`). NULL and a message
 * naming the file in err on failure. */
mt_sp *mt_sp_load(const char *path, char *err, size_t errlen);
void mt_sp_free(mt_sp *sp);

/* Pieces in the model; the eos id (-1 when the model has none). */
int mt_sp_vocab_size(const mt_sp *sp);
int mt_sp_eos(const mt_sp *sp);

/* Encode text[0, len) as SentencePieceProcessor::EncodeAsIds does (no BOS/EOS;
 * control-symbol strings in the text are ordinary text). Appends the ids to
 * *ids (malloc'ed / realloc'ed; *cap its capacity), returns how many, or -1
 * with a message in err. */
long mt_sp_encode(const mt_sp *sp, const char *text, size_t len, int32_t **ids, size_t *n,
                  size_t *cap, char *err, size_t errlen);

/* SentencePieceProcessor::Decode of ids into a malloc'ed NUL-terminated string
 * (length in *len); NULL with a message for an id outside the vocabulary. */
char *mt_sp_decode(const mt_sp *sp, const int32_t *ids, size_t n, size_t *len, char *err,
                   size_t errlen);

/* The piece of `id` (NUL-terminated, owned by the model), NULL outside the
 * vocabulary; *is_byte = 1 for a byte-fallback piece <0xNN> (its byte in
 * *byte), *is_control = 1 for control/unknown symbols (<s>, </s>, <unk>). */
const char *mt_sp_piece(const mt_sp *sp, int id, int *is_byte, unsigned char *byte,
                        int *is_control);

#ifdef __cplusplus
}
#endif
#endif
