#!/usr/bin/env bash
# For a build host that reaches no package registry (e.g. a locked-down GPU server):
#   on a machine that reaches Debian's mirrors:  scripts/offline-deps.sh download
#   copy the tree (with .deps/) to the build host, then configure with the release preset,
#   which already points CMAKE_PREFIX_PATH at .deps/usr.
# The packages are the same Debian packages scripts/setup.sh installs, unpacked (dpkg -x)
# into the ignored folder .deps/ instead of installed. fmt's CMake config needs libfmt9
# (the shared library) beside libfmt-dev.
set -euo pipefail
cd "$(dirname "$0")/.."
pkgs=(libcli11-dev nlohmann-json3-dev libfmt-dev libfmt9 catch2)

case "${1:-download}" in
  download)
    mkdir -p .deps/debs
    (cd .deps/debs && apt-get download "${pkgs[@]}")
    for f in .deps/debs/*.deb; do dpkg -x "$f" .deps; done
    rm -rf .deps/debs
    echo "offline-deps: unpacked ${pkgs[*]} into .deps/"
    ;;
  check)
    for f in usr/include/CLI/CLI.hpp usr/include/nlohmann/json.hpp usr/include/fmt/core.h \
             usr/include/catch2/catch.hpp; do
      [[ -f .deps/$f ]] || { echo "offline-deps: .deps/$f missing" >&2; exit 1; }
    done
    echo "offline-deps: complete"
    ;;
  *) echo "usage: $0 [download|check]" >&2; exit 2 ;;
esac
