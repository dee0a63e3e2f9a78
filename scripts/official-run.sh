#!/usr/bin/env bash
# Installs what is missing, builds, prints the plan of the official ablation and, where a CUDA
# device exists, runs it (448 points per dtype plus the auto point of each case, FP16/BF16/FP32)
# into runs/official-<time>, times PyTorch's nn.TransformerEncoder on the same cases, dtypes and
# fp32 math right after on the same GPU (scripts/pytorch_peer.py, where PyTorch with CUDA is
# installed), analyses it (tlbench report) and gates it (configs/gates.json).
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
  # PyTorch on the sweep's own selection, as run.json records it (an empty one means all).
  if why=$(python3 -c 'import sys
try:
    import torch
except ImportError as e:
    sys.exit(f"PyTorch is not installed ({e})")
if not torch.cuda.is_available():
    sys.exit(f"PyTorch {torch.__version__} sees no CUDA device")' 2>&1); then
    mapfile -t peer_args < <(python3 -c 'import json, sys
o = json.load(open(sys.argv[1])).get("options", {})
for flag, key in (("--cases", "cases"), ("--dtypes", "dtypes"), ("--math", "fp32_math")):
    if o.get(key):
        print(flag)
        print(o[key])' "$out/run.json")
    python3 scripts/pytorch_peer.py configs/cases.json --out "$out" "${peer_args[@]}" ||
      echo "(pytorch_peer.py exited $?: the PyTorch comparison in $out is missing or partial)"
  else
    echo "PyTorch comparison not run: ${why}"
  fi
  build/release/tlbench report "$out"
  if ! build/release/tlbench gate --results "$out" --thresholds configs/gates.json; then
    echo "(configs/gates.json is tuned on the H200 results in results/h200; another GPU measures other speedups)"
  fi
else
  echo
  echo "No usable CUDA device here, so the sweep was not run; 'tlbench info' says why:"
  build/release/tlbench info || true
fi
