#!/usr/bin/env bash
# Installs what is missing, builds everything (all CUDA sources for sm_90a and sm_80), runs
# the test suites and gates the committed official results. GPU tests are reported as skipped
# where no CUDA device is usable.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PATH="/usr/local/cuda/bin:$PATH"
# ptxas names every kernel that spills registers; no kernel may spill more than the committed
# budget allows (scripts/spill_check.py, configs/spill-budget.json).
cmake --preset release -DTLBENCH_WARN_SPILLS=ON
cmake --build --preset release 2>&1 | tee build/release/build.log
python3 scripts/spill_check.py build/release/build.log
ctest --preset release
# The committed official results of each card must pass the committed thresholds (no GPU
# needed), and a second sweep on another machine of that card (of the same kernels), where one
# is committed, must pass them against the first as its baseline: what a CI pipeline gating on
# tlbench relies on.
gated=0
for card in h200 h100; do
  if [[ ! -f results/$card/run.json ]]; then
    echo "test.sh: no results/$card committed: its gate is not run"
    continue
  fi
  ./build/release/tlbench gate --results "results/$card" --thresholds configs/gates.json
  gated=$((gated + 1))
  if [[ -d results/$card-rerun ]]; then
    ./build/release/tlbench gate --results "results/$card-rerun" --thresholds configs/gates.json --baseline "results/$card"
  else
    echo "test.sh: no results/$card-rerun committed: the rerun gate against results/$card is not run"
  fi
done
if ((gated == 0)); then
  echo "test.sh: no official results committed (results/h200, results/h100): nothing was gated" >&2
  exit 1
fi
