#!/usr/bin/env bash
# tests/integration/test_data_fuzz.sh — CI's fuzz step, deterministic
# (tests/fuzz/run_fuzz.sh --ci): every reader — the MMIDIDX index and
# JSON-lines readers, the layout-free checkpoint (index.bin + shard reads,
# metadata.json), the legacy per-layout checkpoint, the config, the planner's
# hardware file and safetensors — replays the inputs that once crashed it
# (tests/fuzz/regress/), then runs a fixed number of executions from its seed
# corpus and regression inputs with a fixed seed (1) and the address space
# not randomized: two runs of one tree print the same lines. Open-ended
# fuzzing (random seed, long runs): bash bench/fuzz.sh SECONDS (RUNS=1000000
# for a fixed count).
cd "$(dirname "$0")/../.."
exec bash tests/fuzz/run_fuzz.sh --ci
