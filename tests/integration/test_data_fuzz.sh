#!/usr/bin/env bash
# tests/integration/test_data_fuzz.sh — short libFuzzer run (3 s per target,
# MEGATRAIN_FUZZ_SECONDS) of every reader: the MMIDIDX index and JSON-lines
# readers, the layout-free checkpoint (index.bin + shard reads, metadata.json),
# the legacy per-layout checkpoint, the config, the planner's hardware file
# and safetensors; the inputs that once crashed a reader (tests/fuzz/regress/)
# are replayed first. Longer
# runs: bash bench/fuzz.sh 600 (RUNS=1000000 for a fixed count).
cd "$(dirname "$0")/../.."
exec bash tests/fuzz/run_fuzz.sh "${MEGATRAIN_FUZZ_SECONDS:-3}"
