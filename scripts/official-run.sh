#!/usr/bin/env bash
# Installs what is missing, builds, prints the plan of the official ablation and, where a CUDA
# device exists, runs it (448 points per dtype plus the auto point of each case, FP16/BF16/FP32)
# into runs/official-<time>, times PyTorch's nn.TransformerEncoder on the same cases, dtypes and
# fp32 math right after on the same GPU (scripts/pytorch_peer.py, where PyTorch with CUDA is
# installed), analyses it (tlbench report) and gates it (configs/gates.json). Where the sweep
# ran fp32 in TF32 math, the same cases then run in fp32 IEEE math into
# runs/official-<time>-fp32-ieee, with their own PyTorch peer (TF32 off) and report, and the
# dispatch table of both folders is written to runs/official-<time>/dispatch-both.json (the
# form of configs/dispatch.json).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PATH="/usr/local/cuda/bin:$PATH"
cmake --preset release >/dev/null
cmake --build --preset release
build/release/tlbench plan --config configs/cases.json --policy auto
if build/release/tlbench info >/dev/null 2>&1; then
  out="runs/official-$(date +%Y%m%d-%H%M%S)"
  # A point that fails the golden criterion (exit 1) still leaves a run to compare and report.
  rc=0
  # The stage times of the reference and the auto point make the stage breakdown chart, unless
  # the options given ask for stage times of their own.
  stages=(--stage-times-configs 00000,auto)
  for arg in "$@"; do [[ $arg == --stage-times* ]] && stages=(); done
  build/release/tlbench run --config configs/cases.json --policy auto "${stages[@]}" --out "$out" "$@" || rc=$?
  ((rc <= 1)) || exit "$rc"
  # The selection a finished run recorded: its cases, dtypes, fp32 math and --quick, one line
  # each (empty: all cases, all dtypes, not quick).
  recorded() {
    python3 -c 'import json, sys
o = json.load(open(sys.argv[1])).get("options", {})
for key in ("cases", "dtypes", "fp32_math", "quick"):
    print("--quick" if o.get(key) is True else (o.get(key) or ""))' "$1/run.json"
  }
  # PyTorch on a run's own selection.
  peer() {
    local cases dtypes fp32_math args=()
    { read -r cases; read -r dtypes; read -r fp32_math; } < <(recorded "$1")
    [[ -n $cases ]] && args+=(--cases "$cases")
    [[ -n $dtypes ]] && args+=(--dtypes "$dtypes")
    [[ -n $fp32_math ]] && args+=(--math "$fp32_math")
    python3 scripts/pytorch_peer.py configs/cases.json --out "$1" "${args[@]}" ||
      echo "(pytorch_peer.py exited $?: the PyTorch comparison in $1 is missing or partial)"
  }
  if why=$(python3 -c 'import sys
try:
    import torch
except ImportError as e:
    sys.exit(f"PyTorch is not installed ({e})")
if not torch.cuda.is_available():
    sys.exit(f"PyTorch {torch.__version__} sees no CUDA device")' 2>&1); then
    have_torch=1
  else
    have_torch=0
    echo "PyTorch comparison not run: ${why}"
  fi
  ((have_torch)) && peer "$out"
  build/release/tlbench report "$out"
  if ! build/release/tlbench gate --results "$out" --thresholds configs/gates.json; then
    echo "(configs/gates.json is tuned on the H200 results in results/h200; another GPU measures other speedups)"
  fi
  # fp32 in the other math: IEEE beside a TF32 sweep, on the same cases.
  { read -r sweep_cases; read -r sweep_dtypes; read -r sweep_fp32_math; read -r sweep_quick; } < <(recorded "$out")
  if [[ ${sweep_fp32_math:-tf32} == tf32 && ( -z $sweep_dtypes || $sweep_dtypes == *fp32* ) ]]; then
    ieee="$out-fp32-ieee"
    # The sweep's own options, but for the dtypes and math this pass sets (--cases and --quick
    # come from its run.json).
    pass_on=()
    skip=0
    for arg in "$@"; do
      if ((skip)); then skip=0; continue; fi
      case $arg in
        --dtypes|--fp32-math|--out|--cases) skip=1 ;;
        --dtypes=*|--fp32-math=*|--out=*|--cases=*|--quick) ;;
        *) pass_on+=("$arg") ;;
      esac
    done
    ieee_rc=0
    build/release/tlbench run --config configs/cases.json --policy auto --dtypes fp32 --fp32-math ieee \
      ${sweep_cases:+--cases "$sweep_cases"} $sweep_quick "${stages[@]}" --out "$ieee" "${pass_on[@]}" || ieee_rc=$?
    ((ieee_rc <= 1)) || exit "$ieee_rc"
    ((rc >= ieee_rc)) || rc=$ieee_rc
    ((have_torch)) && peer "$ieee"
    build/release/tlbench report "$ieee"
    if build/release/tlbench dispatch --results "$out" --results "$ieee" -o "$out/dispatch-both.json" --quiet; then
      echo "dispatch table of both maths: $out/dispatch-both.json (copied over configs/dispatch.json it becomes the built-in one)"
    else
      echo "(no dispatch table of both maths: tlbench dispatch refused the two folders, as said above)"
    fi
  fi
  exit "$rc"
else
  echo
  echo "No usable CUDA device here, so the sweep was not run; 'tlbench info' says why:"
  build/release/tlbench info || true
fi
