#!/usr/bin/env bash
# One call on a GPU host: configure, build with all cores, then the steps asked for, logging
# under $OUT (default ./gpu-out). Works without a package registry: the Debian packages
# unpacked by scripts/offline-deps.sh in .deps/ are found through CMAKE_PREFIX_PATH.
#   scripts/gpu-check.sh build test bench gemmbench gemmenergy attnbench ncu aa sweep sanitize pytorch select peer pdl repeat
#   scripts/gpu-check.sh build official     (stops resumable at SWEEP_TIMEOUT: carry results/<card> (h200, h100)
#       back and call `build official` again to finish it; PyTorch runs after a complete sweep
#       where the call has PEER_NEEDS seconds left (about 330: its modes settle 2 s each), else
#       `peer` with PEER_DIR=results/<card> PEER_ARGS=--math\ tf32 as the next call, on the same
#       machine; then, on another machine, `build rerun` the same way; `build ieee` for FP32 in
#       IEEE math beside PyTorch's. Within a 600 s call: BUILD_TARGETS=tlbench SWEEP_TIMEOUT=380
#       OFFICIAL_BUDGET=520, the build taking about 50 s on 16 cores)
# Environment knobs per step: CMAKE_ARGS (e.g. -DCMAKE_CUDA_ARCHITECTURES=90a), BUILD_TARGETS, GEMM_MATCH, GPU_TESTS, GPU_TESTS_TIMEOUT, SANITIZE_TOOLS,
# PREBUILT (build: unpack scripts/prebuild-gpu.sh's pack instead of compiling),
# SANITIZE_TESTS, SANITIZE_TIMEOUT, BENCH_ARGS, BENCH_TIMEOUT, ATTN_AB, GEMM_AB, GEMM_ENERGY, ENERGY_MATCH, ENERGY_VARIANTS, NCU_KERNELS, NCU_BENCH, NCU_MATCH,
# RERUN_SAME_MACHINE (rerun: run it on the baseline's own card too), SWEEP_ARGS, SWEEP_TIMEOUT (seconds: official/rerun/ieee's --time-limit, the sweep step's SIGINT), OFFICIAL_BUDGET, EXPLAIN_CASES,
# EXPLAIN_DTYPES (explain and pdl), EXPLAIN_CONFIGS, IEEE_CONFIGS, SELECT_ARGS, PEER_ARGS, PEER_DIR, PEER_TIMEOUT, PEER_NEEDS, PROFILE_ARGS,
# PROFILE_NCU_FLAGS, PYTORCH_CASES, PYTORCH_DTYPES, REPEAT_ARGS, REPEAT_N, REPEAT_TIMEOUT.
# At the end every log is bundled into logs.tar.gz; summary.txt and kernels.jsonl (the
# side-by-side kernel records, for results/h200/kernels.jsonl) also come back on their own.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export PATH="/usr/local/cuda/bin:$PATH"
[[ -f .git-commit ]] && export TLBENCH_GIT_COMMIT=$(cat .git-commit)
BUILD=build/gpu
BIN=$BUILD/tlbench
steps=("$@")
[[ ${#steps[@]} -eq 0 ]] && steps=(build test)

log() { echo "== $(date +%T) $*" | tee -a "$OUT/summary.txt"; }
# `explain_case DTYPE CASE ARGS...`: tlbench explain of one official case (a hang ends at 120 s).
explain_case() {
  local dt=$1 c=$2
  shift 2
  timeout 120 $BIN explain --config configs/cases.json --case "$c" --dtype "$dt" "$@"
}
# `run_peer DIR SECONDS ARGS...`: PyTorch's nn.TransformerEncoder on the official cases into
# DIR/peer_pytorch.jsonl, its log in peer.log. The file is written at the end, so an earlier
# one goes first; under 30 s left nothing is run (exit 124, as a timeout).
run_peer() {
  local dir=$1 limit=$2
  shift 2
  rm -f "$dir/peer_pytorch.jsonl"
  ((limit > 30)) || return 124
  timeout "$limit" python3 scripts/pytorch_peer.py configs/cases.json --out "$dir" "$@" >"$OUT/peer.log" 2>&1
}
# `stall_report DIR PID`: for a `tlbench run` into DIR under the background job PID (timeout,
# then time, then tlbench) that did not stop when told to: the kernels resident on the GPU
# (cuda-gdb), the card's state and the last (case, dtype) group on disk. tlbench's own notice,
# in its stderr, names the point it waits in.
stall_report() {
  local pid
  pid=$(pgrep -P "$(pgrep -P "$2" | head -1)" | head -1)
  if [[ -n $pid ]] && command -v cuda-gdb >/dev/null; then
    # The kernels on the card, then every thread of them grouped by the line it is at: which
    # barrier each warp of a stuck block waits on.
    timeout 40 cuda-gdb -p "$pid" -batch -ex "info cuda kernels" -ex "info cuda threads" 2>&1 |
      grep -vE "^\[(New|Thread)" | tail -60
  fi
  timeout 5 nvidia-smi --query-gpu=utilization.gpu,clocks.sm,power.draw,clocks_event_reasons.active --format=csv
  python3 - "$1/points.jsonl" <<'PY'
import json, sys
groups = []
try:
    for line in open(sys.argv[1]):
        r = json.loads(line)
        key = (r["case_id"], r["dtype"])
        if not groups or groups[-1][0] != key:
            groups.append([key, 0])
        groups[-1][1] += 1
except (OSError, ValueError, KeyError):  # no file yet, or a line cut off as it was written
    pass
print(f"{len(groups)} groups on disk; the last: " +
      (f"case {groups[-1][0][0]} {groups[-1][0][1]} ({groups[-1][1]} points)" if groups else "none"))
PY
}
# `case_ids LIST`: the case ids of a list such as 1-14 or 2,4,9-10, one per line.
case_ids() {
  local item items
  IFS=',' read -ra items <<<"$1"
  for item in "${items[@]}"; do seq "${item%-*}" "${item#*-}"; done
}
# `run_field DIR KEY`: a top-level field of DIR/run.json, or `device.FIELD` (name, uuid, ...) of its
# device (empty where absent).
run_field() {
  python3 -c 'import json, sys
d = json.load(open(sys.argv[1] + "/run.json"))
f = sys.argv[2]
v = d.get("device", {}).get(f[len("device."):], "") if f.startswith("device.") else d.get(f, "")
print(v)' "$1" "$2" 2>/dev/null
}
# `clocked NAME CMD...`: runs CMD with the card's SM clock, power and clock-limiting reasons
# sampled every 100 ms, and
# writes its output to $OUT/NAME.log and, each line after the median clock and power since
# the line before, to $OUT/NAME-clocks.log. Returns CMD's exit status.
clocked() {
  local name=$1; shift
  nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,clocks_event_reasons.active --format=csv,noheader,nounits -lms 100 \
    >"$OUT/clocks-$name.csv" 2>/dev/null &
  local smi=$!
  stdbuf -oL "$@" 2>&1 | python3 scripts/clock_trace.py stamp >"$OUT/$name.stamped"
  local rc=${PIPESTATUS[0]}
  kill $smi 2>/dev/null; wait $smi 2>/dev/null
  cut -d' ' -f2- "$OUT/$name.stamped" >"$OUT/$name.log"
  python3 scripts/clock_trace.py annotate "$OUT/clocks-$name.csv" "$OUT/$name.stamped" >"$OUT/$name-clocks.log"
  rm -f "$OUT/$name.stamped"
  return $rc
}

# `build_here`: configure and build BUILD_TARGETS (all where unset) with every core.
build_here() {
  log "configure + build"
  cmake -S . -B $BUILD -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$PWD/.deps/usr" \
    -DCMAKE_POLICY_VERSION_MINIMUM=3.5 -DTLBENCH_PTXAS_VERBOSE=ON ${CMAKE_ARGS:-} >"$OUT/build.log" 2>&1 \
    || { tail -30 "$OUT/build.log"; exit 1; }
  local targets=() t
  for t in ${BUILD_TARGETS:-}; do targets+=(--target "$t"); done
  if ! cmake --build $BUILD -j "$(nproc)" "${targets[@]}" -- -k 0 >>"$OUT/build.log" 2>&1; then
    grep -E "error|Error" -A3 "$OUT/build.log" | head -60; exit 1
  fi
}
# `unpack_prebuilt`: the binaries scripts/prebuild-gpu.sh packed for this commit, where the
# build would have put them, their libraries from .deps/.
unpack_prebuilt() {
  log "prebuilt binaries from $PREBUILT"
  [[ -f $PREBUILT ]] || { echo "gpu-check: PREBUILT=$PREBUILT: no such file (scripts/prebuild-gpu.sh makes it)" | tee -a "$OUT/summary.txt"; exit 2; }
  mkdir -p $BUILD && tar xzf "$PREBUILT" -C $BUILD || exit 1
  if [[ -f .git-commit && $(cat $BUILD/commit) != $(cat .git-commit) ]]; then
    echo "gpu-check: $PREBUILT was built from $(cat $BUILD/commit), this tree is $(cat .git-commit)" |
      tee -a "$OUT/summary.txt"
    exit 1
  fi
  export LD_LIBRARY_PATH="$PWD/.deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export TLBENCH_KERNEL_BENCH="$PWD/$BUILD/tlbench_kernel_bench"  # for the GPU test that runs it
  # The tests that run the CLI find it where the pack was built (build/gpu-prebuild).
  [[ -e build/gpu-prebuild ]] || ln -s gpu build/gpu-prebuild
}

for step in "${steps[@]}"; do
  case $step in
    build)
      if [[ -n ${PREBUILT:-} ]]; then unpack_prebuilt; else build_here; fi
      $BIN --version | tee -a "$OUT/summary.txt"
      $BIN info | tee -a "$OUT/summary.txt"
      nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv | tee -a "$OUT/summary.txt"
      ;;
    test)
      log "GPU + CPU tests"
      (cd $BUILD && ctest -j1 --output-on-failure --timeout 900) >"$OUT/tests.log" 2>&1
      grep -E "tests passed|tests failed|Failed|\*\*\*|Skipped" "$OUT/tests.log" | tail -40 | tee -a "$OUT/summary.txt"
      ;;
    gputests)
      log "GPU tests tagged ${GPU_TESTS:-[gpu]}"
      # Test specs separated by ';', each its own process (a hang in one ends at its timeout).
      IFS=';' read -ra specs <<<"${GPU_TESTS:-[gpu]}"
      for spec in "${specs[@]}"; do
        timeout "${GPU_TESTS_TIMEOUT:-900}" $BUILD/tests/tlbench_gpu_tests -d yes "$spec" >>"$OUT/gputests.log" 2>&1
        echo "$spec: rc=$?" | tee -a "$OUT/summary.txt"
        grep -E "^(All tests passed|test cases:)" "$OUT/gputests.log" | tail -1 | tee -a "$OUT/summary.txt"
      done
      ;;
    profile)
      log "per-kernel device time (ncu) of ${PROFILE_ARGS:=--cases 1 --dtypes fp16 --configs 11110}"
      rm -rf /tmp/tlbench-profile
      ncu --csv --metrics gpu__time_duration.sum ${PROFILE_NCU_FLAGS:-} $BIN run --config configs/cases.json $PROFILE_ARGS \
        --quick --min-reps 2 --max-reps 2 --out /tmp/tlbench-profile >"$OUT/profile.csv" 2>"$OUT/profile.err"
      echo "rc=$?" >>"$OUT/summary.txt"
      python3 scripts/kernel_profile.py --sequence "${PROFILE_SEQUENCE:-0}" "$OUT/profile.csv" >"$OUT/profile.txt" 2>&1
      head -40 "$OUT/profile.txt" >>"$OUT/summary.txt"
      ;;
    ncu)
      # One launch per kernel in NCU_KERNELS (regular expressions over mangled names, separated
      # by ';') of `tlbench_kernel_bench ${NCU_BENCH:-attn}` (with NCU_MATCH: `--match TEXT`,
      # the gemm benchmark's filter; one TEXT for all, or one per kernel separated by ';'), at
      # the clocks the card runs at: pipe utilisation, issue slots, warp stalls, and in
      # ncu-source-N.csv the stall samples of every SASS instruction.
      IFS=';' read -ra kernels <<<"${NCU_KERNELS:?ncu needs NCU_KERNELS}"
      IFS=';' read -ra matches <<<"${NCU_MATCH:-}"
      if ((${#matches[@]} > 1 && ${#matches[@]} != ${#kernels[@]})); then
        echo "gpu-check: NCU_MATCH has ${#matches[@]} entries for ${#kernels[@]} NCU_KERNELS (one for all, or one each)" >&2
        exit 2
      fi
      for i in "${!kernels[@]}"; do
        match=${matches[0]:-}
        ((${#matches[@]} > 1)) && match=${matches[$i]}
        log "ncu: first launch matching ${kernels[$i]}${match:+ in GEMMs matching '$match'}"
        timeout 300 ncu --clock-control none --kernel-name-base mangled -k "regex:${kernels[$i]}" -c 1 \
          --section SpeedOfLight --section ComputeWorkloadAnalysis --section SchedulerStats \
          --section WarpStateStats --section Occupancy --section SourceCounters --section InstructionStats \
          --section MemoryWorkloadAnalysis \
          --metrics "sm__cycles_elapsed.avg.per_second,lts__throughput.avg.pct_of_peak_sustained_elapsed,l1tex__data_bank_reads.avg.pct_of_peak_sustained_elapsed,l1tex__data_bank_writes.avg.pct_of_peak_sustained_elapsed,regex:sm__inst_executed_pipe_.*\.avg\.pct_of_peak_sustained_active,regex:sm__pipe_.*_cycles_active\.avg\.pct_of_peak_sustained_active,regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,smsp__inst_executed_op_shared_ld.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum" \
          -f -o "/tmp/ncu-$i" $BUILD/tlbench_kernel_bench ${NCU_BENCH:-attn} ${match:+--match "$match"} \
          >"$OUT/ncu-run-$i.log" 2>&1
        echo "rc=$?" | tee -a "$OUT/summary.txt"
        ncu -i "/tmp/ncu-$i.ncu-rep" --print-details all >"$OUT/ncu-$i.log" 2>&1
        ncu -i "/tmp/ncu-$i.ncu-rep" --page source --csv --print-source sass >"$OUT/ncu-source-$i.csv" 2>&1
        grep -E "SM Frequency|cycles_elapsed.avg.per_second|op_shared_ld|wavefronts_mem_shared|bank_conflicts_pipe|stalled_(short_scoreboard|long_scoreboard|barrier|mio_throttle|math_pipe_throttle|wait|not_selected|selected)_per|Achieved Occupancy|Registers Per|lts__throughput|data_bank_(reads|writes)|L2 Cache Throughput|Compute \(SM\) Throughput|Issue Slots Busy|pipe_(tensor|xu|fma|alu|fmaheavy|uniform).*(pct|%)|Duration" "$OUT/ncu-$i.log" | head -60 | tee -a "$OUT/summary.txt"
      done
      ;;
    sanitize)
      # SANITIZE_TESTS: Catch test specs separated by ';'. Every tool runs over every spec, each
      # pair its own process, all at once (a sanitizer keeps one CPU core busy, the GPU idles).
      log "compute-sanitizer ${SANITIZE_TOOLS:=memcheck racecheck} over ${SANITIZE_TESTS:=[kernels]}"
      IFS=';' read -ra specs <<<"$SANITIZE_TESTS"
      for tool in $SANITIZE_TOOLS; do
        for i in "${!specs[@]}"; do
          (
            TLBENCH_SYNC_LAUNCHES=1 timeout "${SANITIZE_TIMEOUT:-600}" compute-sanitizer --tool $tool \
              --error-exitcode 9 $BUILD/tests/tlbench_gpu_tests -s -r compact "${specs[$i]}" \
              >"$OUT/sanitize-$tool-$i.log" 2>&1
            rc=$?
            echo "$tool over ${specs[$i]}: rc=$rc $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/sanitize-$tool-$i.log" | tail -1)" \
              "$(grep -E '^(Passed|Failed|All tests)' "$OUT/sanitize-$tool-$i.log" | tail -1)" | tee -a "$OUT/summary.txt"
          ) &
        done
      done
      wait
      ;;
    bench)
      log "kernel benchmarks ${BENCH_ARGS:-all}"
      $BUILD/tlbench_kernel_bench ${BENCH_ARGS:-all} 2>&1 | tee -a "$OUT/bench.log" | tail -60 >>"$OUT/summary.txt"
      ;;
    gemmbench)
      # Our layer GEMMs beside cuBLAS on the same products, turns taken, one record each.
      log "GEMM speed table: ours (every big-grid sm_90a variant) and cuBLAS"
      # GEMM_ENERGY=1: every row also runs cuBLAS and the pick alone (--energy).
      clocked gemmbench timeout "${BENCH_TIMEOUT:-300}" $BUILD/tlbench_kernel_bench gemm "$OUT/gemm-ours.jsonl" \
        ${GEMM_MATCH:+--match "$GEMM_MATCH"} ${GEMM_ENERGY:+--energy}
      echo "rc=$?" | tee -a "$OUT/summary.txt"
      grep -E "\] (gemm|      sm90|alone)" "$OUT/gemmbench-clocks.log" | tee -a "$OUT/summary.txt"
      grep -A40 "^dispatcher's picks" "$OUT/gemmbench.log" | tee -a "$OUT/summary.txt"
      [[ -n ${GEMM_ENERGY:-} ]] && python3 scripts/gemm_alone.py "$OUT/gemm-ours.jsonl" 2>&1 | tee -a "$OUT/summary.txt"
      cat "$OUT/gemm-ours.jsonl" >>"$OUT/kernels.jsonl"
      # GEMM_AB="VAR=VALUE ...": the table once more under those environment variables (e.g.
      # TLBENCH_GEMM_STORE=tma), cuBLAS beside it again, for an A/B of two builds of one
      # variant in one call (gemm-ab.jsonl, not a kernels.jsonl record).
      if [[ -n ${GEMM_AB:-} ]]; then
        log "GEMM speed table again under $GEMM_AB"
        env $GEMM_AB timeout "${BENCH_TIMEOUT:-300}" $BUILD/tlbench_kernel_bench gemm "$OUT/gemm-ab.jsonl" \
          ${GEMM_MATCH:+--match "$GEMM_MATCH"} 2>&1 | grep -E "^ gemm|^gemm" | tee -a "$OUT/summary.txt"
      fi
      ;;
    gemmenergy)
      # The GEMMs matching ENERGY_MATCH (default case 12's) once more, and then cuBLAS and our
      # pick each alone (--energy): the SM clock each holds and the energy each spends a GEMM
      # (gemm-energy.jsonl, not kernels.jsonl records: the table's rows are gemmbench's).
      log "GEMM energy: cuBLAS and our pick alone, matching '${ENERGY_MATCH:=case12}'"
      # ENERGY_VARIANTS=1: every big-grid variant alone as well.
      timeout "${BENCH_TIMEOUT:-300}" $BUILD/tlbench_kernel_bench gemm "$OUT/gemm-energy.jsonl" \
        "--energy${ENERGY_VARIANTS:+-variants}" --match "$ENERGY_MATCH" >"$OUT/gemmenergy.log" 2>&1
      echo "rc=$?" | tee -a "$OUT/summary.txt"
      grep -E "^each alone|^gemm|^alone|^      (sm90|fma)" "$OUT/gemmenergy.log" | tee -a "$OUT/summary.txt"
      ;;
    attnbench)
      # Ours, PyTorch SDPA (cuDNN, FlashAttention-2) on the same shapes, then ours again: the mean
      # of ours before and after is set against the peer.
      log "attention speed table: ours, PyTorch SDPA's backends, ours again"
      clocked attnbench timeout "${BENCH_TIMEOUT:-300}" $BUILD/tlbench_kernel_bench attn "$OUT/attn-ours.jsonl"
      echo "rc=$?" | tee -a "$OUT/summary.txt"
      grep -E "\] attn" "$OUT/attnbench-clocks.log" | tee -a "$OUT/summary.txt"
      python3 scripts/attention_peer.py "$OUT/attn-ours.jsonl" "$OUT/kernels.jsonl" --append \
        --rerun $BUILD/tlbench_kernel_bench 2>&1 | tee -a "$OUT/summary.txt"
      # ATTN_AB=SPEC: the table once more with the dispatcher overridden (e.g. longtile), ours
      # alone, for an A/B of two variants in one call (attn-ab.jsonl, not a kernels.jsonl record).
      if [[ -n ${ATTN_AB:-} ]]; then
        log "attention speed table again under TLBENCH_ATTN_VARIANT=$ATTN_AB (ours only)"
        TLBENCH_ATTN_VARIANT=$ATTN_AB timeout "${BENCH_TIMEOUT:-300}" $BUILD/tlbench_kernel_bench attn \
          "$OUT/attn-ab.jsonl" 2>&1 | grep -E "^attn" | tee -a "$OUT/summary.txt"
      fi
      ;;
    aa)
      log "A/A run of the official set"
      /usr/bin/time -f "aa wall %e s" $BIN run --config configs/cases.json --aa --out "$OUT/aa" --json \
        >"$OUT/aa.json" 2>"$OUT/aa.stderr"; echo "rc=$?" >>"$OUT/summary.txt"
      tail -5 "$OUT/aa.stderr" >>"$OUT/summary.txt"
      ;;
    sweep)
      log "full official sweep"
      timeout -s INT "${SWEEP_TIMEOUT:-3600}" /usr/bin/time -f "sweep wall %e s" \
        $BIN run --config configs/cases.json ${SWEEP_ARGS:---policy auto} --out "$OUT/sweep" --json \
        >"$OUT/sweep.json" 2>"$OUT/sweep.stderr"; echo "rc=$?" >>"$OUT/summary.txt"
      tail -5 "$OUT/sweep.stderr" >>"$OUT/summary.txt"
      ;;
    official|rerun|ieee)
      # The official sweep into results/<card> (official: results/h200 on an H200, results/h100
      # on an H100, so that one card's sweep never replaces another's), a second one of the
      # same commit into results/<card>-rerun, gated against results/<card> (rerun), or FP32 in
      # IEEE math on the configurations that matter there (IEEE_CONFIGS) into
      # results/<card>-fp32-ieee (ieee), in
      # the repository's own folders so run.json records the paths the repository uses;
      # PyTorch right after the official and the IEEE one (TF32 on and off), in the time the
      # call has left (OFFICIAL_BUDGET seconds from the step's start).
      # The sweep stops resumable within SWEEP_TIMEOUT seconds (--time-limit: between groups,
      # losing none; a SIGINT a minute later guards it); carry the folder back into the tree
      # and call the step again: a folder whose run.json is not complete is resumed, not
      # started anew (the committed folders are complete, so a first call replaces them).
      card=$(nvidia-smi --query-gpu=name --format=csv,noheader -i 0)
      case $card in
        *H200*) root=results/h200 ;;
        *H100*) root=results/h100 ;;
        *) root=results/gpu ;;
      esac
      case $step in
        official) dest=$root sweep=() peer_math=tf32 ;;
        rerun) dest=$root-rerun sweep=() peer_math= ;;
        ieee) dest=$root-fp32-ieee peer_math=ieee
          sweep=(--dtypes fp32 --fp32-math ieee --configs "${IEEE_CONFIGS:-00000,01011,01111,11011,11111,auto}") ;;
      esac
      t0=$(date +%s)
      state=$(run_field "$dest" state)
      if [[ -n $state && $state != complete ]]; then
        # Only on the GPU it started on: another card's points would not belong in the sweep.
        started_on=$(run_field "$dest" device.name)
        if [[ $started_on != "$card" ]]; then
          log "$step: $dest was started on $started_on, this is $card: not resumed"; exit 1
        fi
        log "$step: resuming $dest ($state)"
        run_args=(run --resume "$dest")
      else
        # A rerun shows what another machine measures: on the baseline's own card it would show
        # less than it claims (RERUN_SAME_MACHINE=1 runs it anyway).
        uuid=$(nvidia-smi --query-gpu=uuid --format=csv,noheader -i 0)
        if [[ $step == rerun && $(run_field "$root" device.uuid) == "$uuid" && -z ${RERUN_SAME_MACHINE:-} ]]; then
          log "rerun: $uuid is the card $root was measured on; a rerun needs another machine"; exit 1
        fi
        log "$step sweep into $dest"
        rm -rf "$dest"
        # Stage times of the reference and auto: the breakdown chart, for a few seconds more.
        run_args=(run --config configs/cases.json --policy auto --stage-times-configs 00000,auto "${sweep[@]}"
                  --out "$dest")
      fi
      limit=${SWEEP_TIMEOUT:-470}
      # The run stops between groups at its limit, and between kernels at the SIGINT a minute
      # later. One still there 30 s after that says which point it waits in (tlbench's stop
      # watchdog, in its stderr); 35 s after the signal the step adds which kernels are on the
      # card and the last group on disk, and 75 s after it the run is killed, so that the call
      # keeps the time to bring it all back.
      timeout -k 75 -s INT $((limit + 60)) /usr/bin/time -f "$step wall %e s" $BIN "${run_args[@]}" --json \
        --time-limit "$limit" \
        >"$OUT/$step.json" 2>"$OUT/$step.stderr" &
      run_pid=$!
      # The sleep is the watcher's own child, ended with it (a sleep left behind would hold
      # this script's output open).
      (
        trap 'kill $! 2>/dev/null; exit 0' TERM
        sleep $((limit + 95)) &
        wait $!
        stall_report "$dest" "$run_pid" >"$OUT/$step-stall.txt" 2>&1
      ) </dev/null >/dev/null 2>&1 &
      watch_pid=$!
      wait $run_pid; echo "rc=$?" | tee -a "$OUT/summary.txt"
      # A report under way is waited for (its commands are bounded); a watcher still asleep is ended.
      if [[ -e $OUT/$step-stall.txt ]]; then wait $watch_pid; else kill $watch_pid 2>/dev/null; wait $watch_pid 2>/dev/null; fi
      [[ -s $OUT/$step-stall.txt ]] && { log "$step did not stop at its SIGINT:"; cat "$OUT/$step-stall.txt" | tee -a "$OUT/summary.txt"; }
      tail -3 "$OUT/$step.stderr" | tee -a "$OUT/summary.txt"
      state=$(run_field "$dest" state)
      if [[ $state != complete ]]; then
        log "$dest is $state: carry $step.tar.gz's folder back into the tree and call the step again"
      elif [[ -n $peer_math ]]; then
        left=$(( ${OFFICIAL_BUDGET:-560} - $(date +%s) + t0 ))
        peer_dtypes=(); [[ $step == ieee ]] && peer_dtypes=(--dtypes fp32)
        # PyTorch's modes settle 2 s each unless they already lose: 284 s for the official
        # dtypes and 120 s for IEEE on an H100 (cb037d4), asked for with a margin.
        needs=${PEER_NEEDS:-$([[ $step == ieee ]] && echo 150 || echo 330)}
        if ((left < needs)); then
          log "PyTorch peer needs about $needs s, $left left: call \`peer\` next on this machine" \
            "with PEER_DIR=$dest PEER_ARGS='${peer_dtypes[*]}${peer_dtypes[*]:+ }--math $peer_math'"
        else
          log "PyTorch peer, fp32 in $peer_math ($left s left)"
          run_peer "$dest" "$left" "${peer_dtypes[@]}" --math "$peer_math"
          echo "peer rc=$? (where it ran out of time: the peer step, PEER_DIR=$dest)" | tee -a "$OUT/summary.txt"
        fi
        [[ $step == official ]] && $BIN gate --results "$dest" --thresholds configs/gates.json 2>&1 | tail -3 \
          | tee -a "$OUT/summary.txt"
      else
        $BIN gate --results "$dest" --thresholds configs/gates.json --baseline "$root" 2>&1 | tail -3 \
          | tee -a "$OUT/summary.txt"
      fi
      tar -czf "$OUT/$step.tar.gz" "$dest"
      ;;
    explain)
      # tlbench explain on every official case (EXPLAIN_CASES, default 1-14) in EXPLAIN_DTYPES
      # (default fp16), the reference and auto, ceilings measured once and cached; one JSON per
      # case and dtype, and the tables in explain.log. Then the same cases' auto stages with
      # their kernels launched alone (tlbench_kernel_bench stages) and the check that the
      # attention and GEMM lines agree with them within 5 % (scripts/explain_vs_bench.py).
      log "explain ${EXPLAIN_CASES:=1-14} ${EXPLAIN_DTYPES:=fp16}"
      mkdir -p "$OUT/explain"
      IFS=',' read -ra dts <<<"$EXPLAIN_DTYPES"
      for dt in "${dts[@]}"; do
        for c in $(case_ids "$EXPLAIN_CASES"); do
          explain_case "$dt" "$c" --configs "${EXPLAIN_CONFIGS:-00000,auto}" --ceilings "$OUT/explain/ceilings.json" \
            --json-out "$OUT/explain/case$c-$dt.json" >>"$OUT/explain.log" 2>&1
          echo "explain case $c $dt: rc=$?" | tee -a "$OUT/summary.txt"
        done
      done
      if [[ ${EXPLAIN_CONFIGS:-00000,auto} == *auto* ]]; then
        timeout "${BENCH_TIMEOUT:-300}" $BUILD/tlbench_kernel_bench stages "$OUT/explain/stages.jsonl" \
          --cases "$EXPLAIN_CASES" --dtypes "$EXPLAIN_DTYPES" >>"$OUT/explain.log" 2>&1
        echo "kernel_bench stages: rc=$?" | tee -a "$OUT/summary.txt"
        python3 scripts/explain_vs_bench.py "$OUT/explain/stages.jsonl" "$OUT"/explain/case*.json \
          >"$OUT/explain-vs-bench.log" 2>&1
        echo "explain_vs_bench: rc=$?" | tee -a "$OUT/summary.txt"
        tail -3 "$OUT/explain-vs-bench.log" | tee -a "$OUT/summary.txt"
      fi
      tar -czf "$OUT/explain.tar.gz" -C "$OUT" explain && rm -rf "${OUT:?}/explain"
      ;;
    pdl)
      # What PDL buys the layer: tlbench explain's forward of auto on every official case
      # (EXPLAIN_CASES, EXPLAIN_DTYPES as for explain) under the default TLBENCH_PDL and under
      # TLBENCH_PDL=all, twice each, alternating; one table of the four forwards per case.
      log "PDL default against all: ${EXPLAIN_CASES:=1-14} ${EXPLAIN_DTYPES:=fp16}"
      IFS=',' read -ra dts <<<"$EXPLAIN_DTYPES"
      for dt in "${dts[@]}"; do
        for mode in default all default all; do
          for c in $(case_ids "$EXPLAIN_CASES"); do
            echo "== $dt $mode case $c" >>"$OUT/pdl.log"
            TLBENCH_PDL=$mode explain_case "$dt" "$c" --configs auto --ceilings "$OUT/pdl-ceilings.json" \
              >>"$OUT/pdl.log" 2>&1
          done
        done
      done
      python3 - "$OUT/pdl.log" <<'PY' | tee -a "$OUT/summary.txt"
import re, sys
runs, key = {}, None
for line in open(sys.argv[1]):
    m = re.match(r"== (\S+) (\S+) case (\d+)", line)
    if m:
        key = m.groups()
        continue
    m = re.search(r"\): forward ([0-9.]+) ms", line)
    if m and key:
        runs.setdefault(key, []).append(float(m.group(1)))
print("dtype case  default ms (two runs)  all ms (two runs)  all/default")
for dt, c in sorted({(k[0], int(k[2])) for k in runs}):
    d, a = runs.get((dt, "default", str(c)), []), runs.get((dt, "all", str(c)), [])
    ratio = f"{sum(a) / len(a) / (sum(d) / len(d)):.3f}" if a and d else "-"
    print(f"{dt:5} {c:4}  {str(d):22} {str(a):22} {ratio}")
PY
      ;;
    select)
      log "run of a selection: ${SELECT_ARGS:=--cases 1 --dtypes fp16}"
      rm -rf "$OUT/select"
      $BIN run --config configs/cases.json $SELECT_ARGS --out "$OUT/select" >"$OUT/select.log" 2>&1
      echo "rc=$?" >>"$OUT/summary.txt"
      python3 - "$OUT/select/points.jsonl" <<'PY' | tee -a "$OUT/summary.txt"
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    ms = r.get("cand_ms")
    print(f"case {r['case_id']:>2} {r['dtype']} {r['config']:>5} {r['status']:>10} "
          f"cand {ms if ms is None else round(ms, 4)} ms speedup {r.get('speedup')} golden {r.get('golden_pass')} "
          f"strict {r.get('strict_pass')} | {r.get('dispatch', '')}")
PY
      ;;
    peer)
      # PyTorch's nn.TransformerEncoder on the same GPU, right after the selection's run, into
      # its folder (PEER_DIR, default the select step's; scripts/results_table.py then sets
      # PyTorch's best beside ours). PEER_TIMEOUT bounds it: the file is written at the end.
      log "PyTorch peer ${PEER_ARGS:=--dtypes fp32 --math ieee} into ${PEER_DIR:=$OUT/select}"
      mkdir -p "$PEER_DIR"
      run_peer "$PEER_DIR" "${PEER_TIMEOUT:-540}" $PEER_ARGS
      echo "rc=$?" | tee -a "$OUT/summary.txt"
      tail -60 "$OUT/peer.log" >>"$OUT/summary.txt"
      [[ $PEER_DIR != "$OUT"/* ]] && cp "$PEER_DIR/peer_pytorch.jsonl" "$OUT/" 2>/dev/null
      ;;
    repeat)
      # A hunt for a kernel that sometimes does not end: `tlbench run $REPEAT_ARGS` (default
      # cases 2 and 3 in fp16 and fp32, where the official sweep at 6f5e51c stopped: case 3 in
      # fp16 right after case 2 in fp32) up to REPEAT_N times, each
      # under REPEAT_TIMEOUT seconds; one that outlives it gets the stall report (where every
      # thread of the kernels on the card is) and is killed, and the hunt ends.
      args=(${REPEAT_ARGS:---cases 2,3 --dtypes fp16,fp32 --policy auto --stage-times-configs 00000,auto})
      log "repeat: tlbench run ${args[*]}, up to ${REPEAT_N:=10} times, ${REPEAT_TIMEOUT:=60} s each"
      for i in $(seq 1 "$REPEAT_N"); do
        rm -rf /tmp/tlbench-repeat
        timeout -k 5 $((REPEAT_TIMEOUT + 45)) /usr/bin/time -f "repeat wall %e s" $BIN run --config configs/cases.json \
          "${args[@]}" --out /tmp/tlbench-repeat >"$OUT/repeat-$i.log" 2>&1 &
        pid=$!
        waited=0
        while kill -0 $pid 2>/dev/null && ((waited < REPEAT_TIMEOUT)); do sleep 1; ((waited++)); done
        if kill -0 $pid 2>/dev/null; then
          log "repeat $i: still running after $REPEAT_TIMEOUT s"
          stall_report /tmp/tlbench-repeat $pid 2>&1 | tee -a "$OUT/summary.txt"
          kill -9 $(pgrep -P "$(pgrep -P $pid | head -1)") $(pgrep -P $pid) $pid 2>/dev/null
          wait $pid 2>/dev/null
          break
        fi
        wait $pid; echo "repeat $i: rc=$? after $waited s" | tee -a "$OUT/summary.txt"
      done
      ;;
    quick)
      log "quick sweep"
      $BIN run --config configs/cases.json --quick --out "$OUT/quick" --json >"$OUT/quick.json" 2>"$OUT/quick.stderr"
      echo "rc=$?" >>"$OUT/summary.txt"; tail -5 "$OUT/quick.stderr" >>"$OUT/summary.txt"
      ;;
    pytorch)
      log "PyTorch agreement on exported cases"
      for c in ${PYTORCH_CASES:-1 6 9}; do for d in ${PYTORCH_DTYPES:-fp32 fp16}; do
        $BIN export --config configs/cases.json --case $c --dtype $d -o /tmp/case$c-$d.safetensors >/dev/null &&
          python3 scripts/check_pytorch.py /tmp/case$c-$d.safetensors 2>&1 | tail -9 | sed "s/^/case $c $d: /" | tee -a "$OUT/summary.txt"
      done; done
      ;;
    *) echo "unknown step $step" >&2; exit 2 ;;
  esac
done
# Bundle each run folder with its summary and log so it comes back as one file.
for d in aa sweep quick select; do
  if [[ -d $OUT/$d ]]; then
    mv "$OUT/$d.json" "$OUT/$d.stderr" "$OUT/$d.log" "$OUT/$d/" 2>/dev/null
    tar -C "$OUT" -czf "$OUT/$d.tar.gz" "$d" && rm -rf "${OUT:?}/$d"
  fi
done
log "done"
shopt -s nullglob
logs=("$OUT"/*.log "$OUT"/*.jsonl "$OUT"/*.csv)
if ((${#logs[@]})); then
  # A second call into the same $OUT bundles into logs-2.tar.gz, and so on: never over the first.
  bundle=logs.tar.gz n=1
  while [[ -e $OUT/$bundle ]]; do bundle=logs-$((++n)).tar.gz; done
  tar -C "$OUT" -czf "$OUT/$bundle" $(basename -a "${logs[@]}") && rm -f "$OUT"/*.log "$OUT"/*.csv "$OUT"/attn-*.jsonl "$OUT"/gemm-*.jsonl
fi
