#!/usr/bin/env bash
# Installs what the build needs and is missing, from Debian's packages: CMake, Ninja, CLI11,
# nlohmann/json, fmt, Catch2 v2 and matplotlib for the charts. The CUDA Toolkit (13) is
# expected on the PATH; it is checked, not installed.
# Where no package registry is reachable, use scripts/offline-deps.sh instead.
set -euo pipefail

pkgs=(cmake ninja-build g++ git libcli11-dev nlohmann-json3-dev libfmt-dev catch2 python3-matplotlib)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo_cmd=()
  [[ $(id -u) -ne 0 ]] && sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if ! command -v nvcc >/dev/null 2>&1; then
  for d in /usr/local/cuda/bin /usr/local/cuda-13/bin; do
    [[ -x $d/nvcc ]] && export PATH="$d:$PATH" && break
  done
fi
command -v nvcc >/dev/null 2>&1 || { echo "setup: nvcc (CUDA Toolkit 13) not found on the PATH" >&2; exit 1; }
echo "setup: ok ($(nvcc --version | tail -1))"
