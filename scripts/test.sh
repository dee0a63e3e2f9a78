#!/usr/bin/env bash
# Installs what is missing, builds everything (all CUDA sources for sm_90a and sm_80), runs
# the test suites and gates the committed official results. GPU tests are reported as skipped
# where no CUDA device is usable.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PATH="/usr/local/cuda/bin:$PATH"
cmake --preset release
cmake --build --preset release
ctest --preset release
# The committed official results must pass the committed thresholds (no GPU needed), and a
# second sweep of the same commit on another machine, where one is committed, must pass them
# against the first as its baseline: what a CI pipeline gating on tlbench relies on.
./build/release/tlbench gate --results results/h200 --thresholds configs/gates.json
if [[ -d results/h200-rerun ]]; then
  ./build/release/tlbench gate --results results/h200-rerun --thresholds configs/gates.json --baseline results/h200
else
  echo "test.sh: no results/h200-rerun committed: the rerun gate against results/h200 is not run"
fi
