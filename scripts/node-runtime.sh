#!/usr/bin/env bash
# Prints the path of a Node.js binary of the given version, installed from the npm registry (the
# node-linux-<arch> package that the `node` package itself would install) into a cache folder
# outside the project, so it never shadows the machine's node in `npm run`. Used by .ci/run to run
# the test suite and the rolling-restart check on the current LTS line as well.
# Usage: scripts/node-runtime.sh 24.21.0
set -euo pipefail

version=${1:?usage: scripts/node-runtime.sh <version>}
case "$(uname -m)" in
  x86_64) arch=x64 ;;
  aarch64) arch=arm64 ;;
  *) echo "node-runtime: no node-linux package for $(uname -m)" >&2; exit 1 ;;
esac
dir="${XDG_CACHE_HOME:-$HOME/.cache}/messages-api/node-$version-linux-$arch"
bin="$dir/node_modules/node-linux-$arch/bin/node"

if [ ! -x "$bin" ] || [ "$("$bin" --version 2>/dev/null)" != "v$version" ]; then
  mkdir -p "$dir"
  npm install --prefix "$dir" --no-save --no-package-lock --no-audit --no-fund --loglevel=error \
    "node-linux-$arch@$version" >&2
fi
[ "$("$bin" --version)" = "v$version" ] || { echo "node-runtime: $bin is not v$version" >&2; exit 1; }
echo "$bin"
