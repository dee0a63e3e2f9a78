#!/usr/bin/env bash
# Installs what is missing, builds, prints the plan of the official ablation and, where a CUDA
# device exists, runs it (448 points per dtype plus the auto point of each case, FP16/BF16/FP32)
# into runs/official-<time>, analyses it (tlbench report) and gates it (configs/gates.json).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PATH="/usr/local/cuda/bin:$PATH"
cmake --preset release >/dev/null
cmake --build --preset release
build/release/tlbench plan --config configs/cases.json --policy auto
if build/release/tlbench info >/dev/null 2>&1; then
  out="runs/official-$(date +%Y%m%d-%H%M%S)"
  build/release/tlbench run --config configs/cases.json --policy auto --out "$out" "$@"
  build/release/tlbench report "$out"
  if ! build/release/tlbench gate --results "$out" --thresholds configs/gates.json; then
    echo "(configs/gates.json is tuned on the H200 results in results/h200; another GPU measures other speedups)"
  fi
else
  echo
  echo "No usable CUDA device here, so the sweep was not run; 'tlbench info' says why:"
  build/release/tlbench info || true
fi
