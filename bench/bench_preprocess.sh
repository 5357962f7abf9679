#!/usr/bin/env bash
# bench/bench_preprocess.sh [MB] — preprocessing throughput: tinyshakespeare
# repeated to ~MB megabytes (default 50), blank-line documents, --append-eod,
# with 1 and 2 workers; prints MB/s of text (tokenization, vocab loading
# excluded; the preprocess summary line shows both) and checks that both runs
# wrote identical files.
set -eu
cd "$(dirname "$0")/.."
MB="${1:-50}"
D="${MEGATRAIN_SHARED_DATA:-$(cd .. && pwd)/shared/data}"
if [ -x ./megatrain ] && ./megatrain preprocess --help >/dev/null 2>&1; then PP="./megatrain preprocess"
else make -s build/tests/tools/preprocess_cli >/dev/null; PP=build/tests/tools/preprocess_cli; fi
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
reps=$(( (MB * 1000000 + 1115393) / 1115394 ))
for i in $(seq "$reps"); do cat "$D/tinyshakespeare.txt"; done > "$T/input.txt"
echo "input: tinyshakespeare x $reps = $(stat -c %s "$T/input.txt") bytes; $(nproc) cores; load: $(cut -d' ' -f1-3 /proc/loadavg)"
for w in 1 2; do
  line=$($PP --input "$T/input.txt" --output-prefix "$T/out$w" --vocab-file "$D/gpt2-vocab.json" \
         --merge-file "$D/gpt2-merges.txt" --append-eod --workers $w 2>/dev/null | tail -n 1)
  mbs=$(echo "$line" | sed -n 's/.* = \([0-9.]*\) MB\/s.*/\1/p')
  echo "workers=$w: $mbs MB/s    ($line)"
done
cmp -s "$T/out1.bin" "$T/out2.bin" && cmp -s "$T/out1.idx" "$T/out2.idx" && echo "outputs identical for 1 and 2 workers"
