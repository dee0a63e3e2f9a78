#!/usr/bin/env bash
# Installs what is missing, builds, prints the plan of the official ablation and, where a CUDA
# device exists, runs it (448 points per dtype, FP16/BF16/FP32) into runs/official-<time>.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PATH="/usr/local/cuda/bin:$PATH"
cmake --preset release >/dev/null
cmake --build --preset release
build/release/tlbench plan --config configs/cases.json
if build/release/tlbench info >/dev/null 2>&1; then
  build/release/tlbench run --config configs/cases.json --out "runs/official-$(date +%Y%m%d-%H%M%S)" "$@"
else
  echo
  echo "No usable CUDA device here, so the sweep was not run; 'tlbench info' says why:"
  build/release/tlbench info || true
fi
