#!/usr/bin/env bash
# tests/fuzz/run_fuzz.sh [SECONDS] [TARGET...] — build the libFuzzer targets
# (clang, -fsanitize=fuzzer,address,undefined), replay the regression inputs
# kept in tests/fuzz/regress/TARGET/ (inputs that once crashed a reader; each
# must now run clean), then run each target for SECONDS (default 60) from a
# generated seed corpus and print per target: executions, exec/s, crashes
# (0/1) and the reproducer path. FUZZ_RUNS=N runs N executions instead of
# for a time (-runs=N, SECONDS is then the upper bound).
# Targets (default: all):
#   mmidx        MMIDIDX index reader + GPT sample index (data/)
#   jsonl        JSON-lines reader + GPT-2 tokenizer round trip (data/)
#   dckpt        layout-free checkpoint: index.bin decode/validate, shard
#                files, piece reads with CRC check and fp32/bf16 conversion
#   dckpt_meta   layout-free checkpoint metadata.json
#   legacy       previous per-layout checkpoint (model_optim_rng.bin records)
#   config       config reader (JSON, overrides, checks, canonical round trip)
#   hw           planner hardware file (planner/plan_hw.c)
#   safetensors  safetensors file and sharded directory with index JSON
# Exit 0 = no crash, 1 = a crash (reproducer left in build/fuzz/TARGET/),
# 77 = no libFuzzer available. FUZZ_BUILD=DIR: build and run in DIR instead
# of build/fuzz.
set -u
cd "$(dirname "$0")/../.."
SECS="${1:-60}"
shift 2>/dev/null
ALL="mmidx jsonl dckpt dckpt_meta legacy config hw safetensors"
TARGETS="${*:-$ALL}"
export MEGATRAIN_SHARED_DATA="${MEGATRAIN_SHARED_DATA:-$(cd .. && pwd)/shared/data}"
CLANG="${CLANG:-clang}"
command -v "$CLANG" >/dev/null || { echo "SKIP: clang not installed"; exit 77; }
B="${FUZZ_BUILD:-build/fuzz}"; mkdir -p "$B"   # FUZZ_BUILD: another build folder
echo 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n){(void)d;(void)n;return 0;}' > "$B/probe.c"
"$CLANG" -fsanitize=fuzzer "$B/probe.c" -o "$B/probe" 2>/dev/null || { echo "SKIP: clang has no libFuzzer"; exit 77; }
FLAGS="-std=c11 -D_GNU_SOURCE -O1 -g -I. -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined"
LIBS="-lcjson -lpcre2-8 -lutf8proc -ldeflate -lz -lm"
CORE="core/util.c core/rng.c core/hash.c core/fileio.c core/dtype.c $(ls core/failpoint.c 2>/dev/null)"
DATA="data/indexed_dataset.c data/gpt_index.c data/np_random.c data/data_util.c data/bpe.c data/bpe_encode.c data/bpe_gpt2.c data/jsonl.c"
DCKPT="checkpoint/dist_checkpoint_index.c checkpoint/dist_checkpoint_meta.c checkpoint/dist_checkpoint_load.c checkpoint/dist_checkpoint_copy.c"
srcs() {
  case "$1" in
    mmidx|jsonl) echo "$DATA $CORE" ;;
    dckpt|dckpt_meta) echo "$DCKPT $CORE" ;;
    config) echo "$(ls config/*.c | tr "\n" " ") $CORE" ;;
    legacy) echo "checkpoint/legacy_reader.c checkpoint/legacy_records.c tests/support/legacy_writer.c model/params.c $DCKPT $CORE" ;;
    hw) echo "planner/plan_hw.c $CORE" ;;
    safetensors) echo "core/safetensors.c core/safetensors_dir.c tests/support/probe_core.c $CORE" ;;
    *) return 1 ;;
  esac
}
for t in $TARGETS; do srcs "$t" >/dev/null || { echo "unknown fuzz target '$t' (known: $ALL)"; exit 2; }; done

# ---- build: every source compiled once (two at a time, only when it or a
# header is newer than its object), then each target linked ----
O=$B/obj; mkdir -p "$O"
all_src=$(for t in $TARGETS; do echo "tests/fuzz/fuzz_$t.c $(srcs "$t")"; done | tr ' ' '\n' | grep . | sort -u)
newest_h=$(find config core checkpoint optimizer tools trainer planner data model parallel tests/support -name '*.h' -printf '%T@ %p\n' 2>/dev/null | sort -n | tail -1 | cut -d' ' -f2)
for f in $all_src; do
  o="$O/$(echo "$f" | tr / _).o"
  if [ ! -f "$o" ] || [ "$f" -nt "$o" ] || { [ -n "$newest_h" ] && [ "$newest_h" -nt "$o" ]; }; then echo "$f"; fi
done | xargs -r -P 2 -I{} sh -c 'f={}; "$0" $1 -c "$f" -o "$2/$(echo "$f" | tr / _).o" 2>"$2/$(echo "$f" | tr / _).log" || { cat "$2/$(echo "$f" | tr / _).log"; exit 1; }' "$CLANG" "$FLAGS" "$O" || { echo "fuzz: compilation failed"; exit 1; }
for t in $TARGETS; do
  objs=""; for f in tests/fuzz/fuzz_$t.c $(srcs "$t"); do objs="$objs $O/$(echo "$f" | tr / _).o"; done
  "$CLANG" $FLAGS $objs -o "$B/fuzz_$t" $LIBS > "$B/build_$t.log" 2>&1 || { echo "link of fuzz_$t failed:"; cat "$B/build_$t.log"; exit 1; }
done

# ---- seed corpora (valid inputs of each reader) and dictionaries ----
/usr/bin/python3 tests/fuzz/make_seeds.py "$B" || exit 1

# ---- regression inputs: each must run clean ----
fails=0
for t in $TARGETS; do
  R=tests/fuzz/regress/$t
  [ -d "$R" ] && [ -n "$(ls -A "$R" 2>/dev/null)" ] || continue
  if "$B/fuzz_$t" -runs=1 "$R"/* > "$B/regress_$t.log" 2>&1; then
    echo "fuzz_$t: $(ls "$R" | wc -l) regression inputs replayed clean"
  else
    echo "fuzz_$t: a regression input in $R crashes again:"; tail -n 30 "$B/regress_$t.log"; fails=$((fails+1))
  fi
done

# ---- fuzz ----
for t in $TARGETS; do
  A="$B/$t"; rm -rf "$A"; mkdir -p "$A"
  work="$B/work_$t"; rm -rf "$work"; mkdir -p "$work"   # new inputs found this run
  dict=""; [ -f "$B/$t.dict" ] && dict="-dict=$B/$t.dict"
  maxlen=4096; case $t in dckpt|dckpt_meta) maxlen=16384 ;; esac
  runs=""; [ -n "${FUZZ_RUNS:-}" ] && runs="-runs=$FUZZ_RUNS"
  t0=$(date +%s.%N)
  "$B/fuzz_$t" -max_total_time="$SECS" $runs -print_final_stats=1 -max_len=$maxlen -timeout=10 \
    -rss_limit_mb=2048 -malloc_limit_mb=1024 $dict -artifact_prefix="$A/" "$work" "$B/corpus_$t" \
    > "$B/fuzz_$t.log" 2>&1; rc=$?
  t1=$(date +%s.%N)
  execs=$(grep -m1 'stat::number_of_executed_units' "$B/fuzz_$t.log" | awk '{print $2}')
  secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.0f", b-a}')
  rate=$(awk -v e="${execs:-0}" -v a="$t0" -v b="$t1" 'BEGIN{printf "%.0f", e/(b-a)}')
  repro=$(ls "$A"/crash-* "$A"/leak-* "$A"/oom-* "$A"/timeout-* "$A"/slow-unit-* 2>/dev/null | grep -v slow-unit | head -1)
  crashed=0; if [ $rc -ne 0 ] || [ -n "$repro" ]; then crashed=1; fi
  printf 'fuzz_%-12s %4ss  executions %10s  exec/s %7s  crashes %d  %s\n' "$t" "$secs" "${execs:-?}" "$rate" \
    "$crashed" "${repro:+reproducer $repro}"
  if [ $crashed -ne 0 ]; then fails=$((fails+1)); grep -m1 -A25 'ERROR\|==ABORT\|runtime error\|deadly signal' "$B/fuzz_$t.log" | head -40; fi
done
[ $fails -eq 0 ]
