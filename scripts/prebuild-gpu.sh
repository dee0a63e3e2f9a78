#!/usr/bin/env bash
# Builds the binaries a GPU host runs (sm_90a only) on this machine and packs them, stripped,
# into build/prebuilt.tar.gz (about 25 MB), for a GPU host whose time is short: carried there
# with .deps/, `PREBUILT=build/prebuilt.tar.gz scripts/gpu-check.sh build ...` unpacks them
# instead of compiling (about 50 s on 16 cores). The pack names the commit it was built from;
# this script refuses a tree with uncommitted changes, gpu-check a pack of another commit. The
# `test` step (ctest) needs a build tree on the host; `gputests` and the benchmarks do not.
#   scripts/prebuild-gpu.sh [TARGET ...]   (default: tlbench tlbench_kernel_bench tlbench_gpu_tests)
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/cuda/bin:$PATH"
targets=("$@")
((${#targets[@]})) || targets=(tlbench tlbench_kernel_bench tlbench_gpu_tests)
for t in "${targets[@]}"; do
  case $t in
    tlbench | tlbench_kernel_bench | tlbench_gpu_tests) ;;
    *) echo "prebuild-gpu: unknown target '$t' (expected tlbench, tlbench_kernel_bench or tlbench_gpu_tests)" >&2; exit 2 ;;
  esac
done
if [[ -e build/prebuilt.tar.gz || -L build/prebuilt.tar.gz ]] && [[ ! -f build/prebuilt.tar.gz || -L build/prebuilt.tar.gz ]]; then
  echo "prebuild-gpu: build/prebuilt.tar.gz is not a regular file; not replaced" >&2
  exit 2
fi
if [[ -n $(git status --porcelain --untracked-files=no) ]]; then
  echo "prebuild-gpu: the tree has uncommitted changes: commit them first (the pack names a commit)" >&2
  exit 2
fi
build=build/gpu-prebuild
cmake -S . -B $build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$PWD/.deps/usr" \
  -DCMAKE_CUDA_ARCHITECTURES=90a >/dev/null
args=()
for t in "${targets[@]}"; do args+=(--target "$t"); done
cmake --build $build "${args[@]}"
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/tests"
for t in "${targets[@]}"; do
  src=$build/$t
  [[ $t == tlbench_gpu_tests ]] && src=$build/tests/$t
  dst=$stage/${src#"$build"/}
  cp "$src" "$dst"
  strip "$dst"
done
git rev-parse --short=12 HEAD >"$stage/commit"
tar czf build/prebuilt.tar.gz -C "$stage" .
echo "prebuild-gpu: build/prebuilt.tar.gz ($(du -h build/prebuilt.tar.gz | cut -f1), commit $(cat "$stage/commit")): carry it with .deps"
