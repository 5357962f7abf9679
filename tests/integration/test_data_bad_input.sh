#!/usr/bin/env bash
# tests/integration/test_data_bad_input.sh — `preprocess` on bad input exits
# with status 1 (2 for usage) and one clear message, never a crash, and leaves
# no output files: missing input, empty input, blank-only input, JSON line
# without the key, JSON line that is not JSON, value not a string, bad vocab /
# merges. Invalid UTF-8 is not an error (byte-level) and round-trips.
set -u
cd "$(dirname "$0")/../.."
D="${MEGATRAIN_SHARED_DATA:-$(cd .. && pwd)/shared/data}"
for f in gpt2-vocab.json gpt2-merges.txt; do
  [ -f "$D/$f" ] || { echo "SKIP: $D/$f not found (shared data missing)"; exit 77; }
done
make -s build/tests/tools/preprocess_cli build/tests/tools/mmidx_dump >/dev/null || exit 1
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
PP=build/tests/tools/preprocess_cli
V="--vocab-file $D/gpt2-vocab.json --merge-file $D/gpt2-merges.txt"
fails=0
expect() { # expect STATUS PATTERN -- args...
  local want=$1 pat=$2; shift 3
  rm -f "$T"/out.*
  "$PP" "$@" --output-prefix "$T/out" >"$T/stdout" 2>"$T/stderr"; local rc=$?
  if [ $rc -ne "$want" ] || ! grep -q -- "$pat" "$T/stderr" || ls "$T"/out.* >/dev/null 2>&1; then
    echo "FAIL: $* -> exit $rc (want $want), stderr: $(head -c 300 "$T/stderr")"; fails=$((fails+1))
  else
    echo "ok   exit $rc: $(grep -m1 -- "$pat" "$T/stderr")"
  fi
}
: > "$T/empty.txt"
printf '\n  \n\t\n' > "$T/blank.txt"
printf '{"text": "fine"}\n{"body": "no text key"}\n' > "$T/nokey.jsonl"
printf '{"text": "fine"}\n{"text": "unterminated\n' > "$T/badjson.jsonl"
printf '{"text": 42}\n' > "$T/notstr.jsonl"
printf 'hello' > "$T/hello.txt"
printf '{"a": 1' > "$T/badvocab.json"
expect 1 "cannot open $T/missing.txt" -- --input "$T/missing.txt" $V
expect 1 "empty input" -- --input "$T/empty.txt" $V
expect 1 "empty input" -- --input "$T/blank.txt" $V
expect 1 "nokey.jsonl:2: JSON object has no key \"text\"" -- --input "$T/nokey.jsonl" $V
expect 1 "badjson.jsonl:2: not a JSON object" -- --input "$T/badjson.jsonl" $V
expect 1 "is not a string" -- --input "$T/notstr.jsonl" $V
expect 1 "badvocab.json: not a JSON object" -- --input "$T/hello.txt" --vocab-file "$T/badvocab.json" --merge-file "$D/gpt2-merges.txt"
expect 1 "cannot read /nonexistent/merges.txt" -- --input "$T/hello.txt" --vocab-file "$D/gpt2-vocab.json" --merge-file /nonexistent/merges.txt
expect 2 "unknown option --bogus" -- --input "$T/hello.txt" $V --bogus
expect 2 "--workers must be" -- --input "$T/hello.txt" $V --workers 0
expect 2 "needs --vocab-file and --merge-file" -- --input "$T/hello.txt"
expect 2 "needs --tokenizer-model" -- --input "$T/hello.txt" --tokenizer-type HuggingFaceTokenizer
expect 2 "has no effect with GPT2BPETokenizer" -- --input "$T/hello.txt" $V --tokenizer-model x
expect 2 "--tokenizer-type must be" -- --input "$T/hello.txt" --tokenizer-type BertWordPieceLowerCase
expect 1 "not a SentencePiece model" -- --input "$T/hello.txt" --tokenizer-type SentencePieceTokenizer --tokenizer-model "$T/hello.txt"
expect 1 "not a JSON object" -- --input "$T/hello.txt" --tokenizer-type HuggingFaceTokenizer --tokenizer-model "$T/hello.txt"
# invalid UTF-8: accepted, byte-level, decodes back to the same bytes
printf 'caf\xc3\xa9 \xff\xfe broken \xe2\x82 end\n\nsecond doc \xc3\n' > "$T/bad_utf8.txt"
if "$PP" --input "$T/bad_utf8.txt" --output-prefix "$T/u8" $V --quiet && \
   build/tests/tools/mmidx_dump "$T/u8" "$T/u8.tok" | grep -q "docs 2"; then
  echo "ok   invalid UTF-8 encoded byte-level (2 documents)"
else
  echo "FAIL: invalid UTF-8 input"; fails=$((fails+1))
fi
# reader side: a .idx with wrong magic / truncated gives an error, not a crash
cp "$T/u8.bin" "$T/w.bin"; printf 'NOTMMIDX_and_some_more_bytes_here_x' > "$T/w.idx"
build/tests/tools/mmidx_dump "$T/w" "$T/w.tok" 2>"$T/err"; rc=$?
if [ $rc -eq 1 ] && grep -q "wrong magic" "$T/err"; then echo "ok   reader: $(cat "$T/err")"; else echo "FAIL: reader wrong magic rc=$rc"; fails=$((fails+1)); fi
head -c 40 "$T/u8.idx" > "$T/t.idx"; cp "$T/u8.bin" "$T/t.bin"
build/tests/tools/mmidx_dump "$T/t" "$T/t.tok" 2>"$T/err"; rc=$?
if [ $rc -eq 1 ] && grep -q "truncated" "$T/err"; then echo "ok   reader: $(cat "$T/err")"; else echo "FAIL: reader truncated rc=$rc"; fails=$((fails+1)); fi
# trainer side: a dataset without tokens says so (not a token-id sentinel), and
# an empty validation split says it has no documents
if [ -x ./megatrain ]; then
  /usr/bin/python3 - "$T" <<'PY'
import struct, sys
def w(prefix, sizes):  # Megatron .idx/.bin, int32 tokens (dtype code 4)
    with open(prefix + ".idx", "wb") as f:
        f.write(b"MMIDIDX\x00\x00" + struct.pack("<QBQQ", 1, 4, len(sizes), len(sizes) + 1))
        f.write(b"".join(struct.pack("<i", s) for s in sizes))
        p = 0
        for s in sizes:
            f.write(struct.pack("<q", p)); p += 4 * s
        f.write(b"".join(struct.pack("<q", i) for i in range(len(sizes) + 1)))
    with open(prefix + ".bin", "wb") as f:
        f.write(b"".join(struct.pack("<i", i % 100) for i in range(sum(sizes))))
w(sys.argv[1] + "/none", [])
w(sys.argv[1] + "/emptydocs", [0, 0, 0])
w(sys.argv[1] + "/two", [200, 200])
PY
  TR=(--config tests/configs/gpt-test.json --set training.train_iters=2 --set training.lr_warmup_iters=0
      --set training.eval_interval=0)
  for ds in none emptydocs; do
    ./megatrain "${TR[@]}" --set data.data_path="[\"$T/$ds\"]" >"$T/stdout" 2>"$T/stderr"; rc=$?
    if [ $rc -eq 1 ] && grep -q "data.data_path '$T/$ds': the dataset has 0 tokens" "$T/stderr" &&
       ! grep -q "negative token id" "$T/stderr"; then
      echo "ok   exit 1: $(grep -m1 'has 0 tokens' "$T/stderr")"
    else
      echo "FAIL: dataset $ds: exit $rc: $(head -c 300 "$T/stderr")"; fails=$((fails+1))
    fi
  done
  ./megatrain "${TR[@]}" --set data.data_path="[\"$T/two\"]" --set data.split=100,0,0 \
    --set training.eval_interval=1 --set training.eval_iters=1 >"$T/stdout" 2>"$T/stderr"; rc=$?
  if [ $rc -eq 0 ] && grep -q "the validation split of '$T/two' (documents 2..2 of 2, split \"100,0,0\") has no documents" "$T/stderr"; then
    echo "ok   exit 0: $(grep -m1 'validation split' "$T/stderr")"
  else
    echo "FAIL: empty validation split: exit $rc: $(head -c 300 "$T/stderr")"; fails=$((fails+1))
  fi
fi
[ $fails -eq 0 ] && echo "PASS: bad input handled" || { echo "$fails failures"; exit 1; }
