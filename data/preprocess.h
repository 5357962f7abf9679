/* data/preprocess.h — `megatrain preprocess`: text or JSON lines -> Megatron
 * MMIDIDX PREFIX.bin/.idx with any tokenizer of data/tokenizer.h (tools/preprocess_data.py in
 * spirit). docs/data.md documents the options and the document rules.
 */
#ifndef MT_DATA_PREPROCESS_H
#define MT_DATA_PREPROCESS_H

/* Run the subcommand; argv[0] = "preprocess". Options:
 *   --input FILE             plain text or JSON lines (required)
 *   --output-prefix PREFIX   writes PREFIX.bin and PREFIX.idx (required)
 *   --tokenizer-type T       GPT2BPETokenizer (default) | HuggingFaceTokenizer |
 *                            SentencePieceTokenizer (Megatron's names)
 *   --vocab-file F --merge-file F   GPT-2 encoder.json / vocab.bpe (GPT2BPETokenizer)
 *   --tokenizer-model P      tokenizer.json (or its folder) / tokenizer.model
 *   --tokenizer-hf-no-include-special-tokens  no post-processor template (BOS)
 *   --json-keys KEY          JSON-lines input, text under KEY (default "text")
 *   --input-format auto|jsonl|text  auto: jsonl when --json-keys is given or
 *                            FILE ends in .json/.jsonl, else text
 *   --doc-sep blank|line|none       plain-text documents: separated by blank
 *                            lines (default), one per line, or the whole file
 *   --append-eod             end every document with the EOD token (Megatron's eod)
 *   --workers N              tokenizer threads (default 1)
 *   --quiet                  no progress lines
 * Returns the exit status: 0 ok, 1 bad input / I/O error (one message on
 * stderr, no output files left behind), 2 usage error. */
int mt_preprocess_main(int argc, char **argv);

#endif
