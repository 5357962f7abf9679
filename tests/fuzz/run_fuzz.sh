#!/usr/bin/env bash
# tests/fuzz/run_fuzz.sh [SECONDS] — build the libFuzzer targets (clang,
# -fsanitize=fuzzer,address,undefined) for the MMIDIDX index reader (+ GPT
# sample index) and the JSON-lines reader (+ tokenizer), run each for SECONDS
# (default 60) from a small seed corpus, and print executions and crashes.
# Exit 0 = no crash, 1 = a crash (reproducer left in build/fuzz/), 77 = no
# libFuzzer available.
set -u
cd "$(dirname "$0")/../.."
SECS="${1:-60}"
export MEGATRAIN_SHARED_DATA="${MEGATRAIN_SHARED_DATA:-$(cd .. && pwd)/shared/data}"
CLANG="${CLANG:-clang}"
command -v "$CLANG" >/dev/null || { echo "SKIP: clang not installed"; exit 77; }
B=build/fuzz; mkdir -p "$B"
echo 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n){(void)d;(void)n;return 0;}' > "$B/probe.c"
"$CLANG" -fsanitize=fuzzer "$B/probe.c" -o "$B/probe" 2>/dev/null || { echo "SKIP: clang has no libFuzzer"; exit 77; }
FLAGS="-std=c11 -D_GNU_SOURCE -O1 -g -I. -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined"
SRC="data/indexed_dataset.c data/gpt_index.c data/data_util.c data/bpe.c data/jsonl.c core/util.c core/rng.c core/hash.c core/fileio.c"
"$CLANG" $FLAGS tests/fuzz/fuzz_mmidx.c $SRC -o "$B/fuzz_mmidx" -lcjson -lpcre2-8 -ldeflate -lz -lm || exit 1
"$CLANG" $FLAGS tests/fuzz/fuzz_jsonl.c $SRC -o "$B/fuzz_jsonl" -lcjson -lpcre2-8 -ldeflate -lz -lm || exit 1
# seed corpora: a real index (first byte = .bin size / 64) and JSON lines
mkdir -p "$B/corpus_mmidx" "$B/corpus_jsonl"
/usr/bin/python3 - "$B/corpus_mmidx/seed1" <<'PY'
import struct, sys
lens = [3, 5, 1, 7]
ptrs, p = [], 0
for l in lens: ptrs.append(p); p += 2 * l
idx = b"MMIDIDX\x00\x00" + struct.pack("<QBQQ", 1, 8, len(lens), len(lens) + 1)
idx += struct.pack(f"<{len(lens)}i", *lens) + struct.pack(f"<{len(lens)}q", *ptrs)
idx += struct.pack(f"<{len(lens)+1}q", *range(len(lens) + 1))
open(sys.argv[1], "wb").write(bytes([1]) + idx)
PY
printf '{"text": "Hello, world! It'"'"'s 2024 \\u00e9\\ud83d\\ude00"}\n{"text": ""}\n{"x": 1}\nnot json \xff\xfe\n' > "$B/corpus_jsonl/seed1"
fails=0
for t in mmidx jsonl; do
  rm -f "$B"/crash-* "$B"/leak-* "$B"/oom-* "$B"/timeout-*
  "$B/fuzz_$t" -max_total_time="$SECS" -print_final_stats=1 -max_len=4096 -timeout=10 -rss_limit_mb=2048 \
    -artifact_prefix="$B/" "$B/corpus_$t" > "$B/fuzz_$t.log" 2>&1; rc=$?
  execs=$(grep -m1 'stat::number_of_executed_units' "$B/fuzz_$t.log" | awk '{print $2}')
  crashes=$(ls "$B"/crash-* "$B"/leak-* "$B"/oom-* "$B"/timeout-* 2>/dev/null | wc -l)
  echo "fuzz_$t: ${SECS}s, executions ${execs:-?}, crashes $crashes, exit $rc"
  if [ $rc -ne 0 ] || [ "$crashes" -ne 0 ]; then fails=$((fails+1)); tail -n 30 "$B/fuzz_$t.log"; fi
done
[ $fails -eq 0 ]
