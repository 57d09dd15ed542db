#!/usr/bin/env bash
# Entry point of the README's commands. Gets Node 24 and pnpm (scripts/toolchain.sh),
# installs the workspace when needed, then runs the asked-for task.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
# shellcheck source=scripts/toolchain.sh
source "$ROOT/scripts/toolchain.sh"

# Install when node_modules is missing or older than the lockfile.
if [ ! -f node_modules/.modules.yaml ] || [ pnpm-lock.yaml -nt node_modules/.modules.yaml ]; then
  pnpm install --frozen-lockfile >&2
fi

task="${1:-}"
shift || true
NODE_RUN=(node --conditions=source --disable-warning=ExperimentalWarning)
case "$task" in
  start)
    # The dashboard the gateway serves at /: built when missing or older than its sources.
    dash=apps/dashboard
    if [ ! -f "$dash/dist/index.html" ] || [ -n "$(find "$dash/src" "$dash/public" "$dash/index.html" \
      packages/client/src packages/contracts/src packages/template/src \
      -newer "$dash/dist/index.html" -print -quit)" ]; then
      echo "building the dashboard ($dash)" >&2
      pnpm --filter @pm/dashboard build >&2
    fi
    exec "${NODE_RUN[@]}" apps/embedded/src/main.ts "$@"
    ;;
  test)
    # Unit tests, type checks and lint of every package, then the tests that use real
    # servers and processes (NATS_URL / REDIS_URL, or testcontainers), one package at a time.
    find . -path ./node_modules -prune -o -type d -name .test-results -prune -exec rm -rf {} + 2>/dev/null || true
    pnpm turbo run typecheck lint test --output-logs=new-only
    pnpm turbo run test:int --concurrency=1 --output-logs=full
    node scripts/test-summary.mjs
    ;;
  bench-invoke)
    exec "${NODE_RUN[@]}" bench/src/invoke.ts "$@"
    ;;
  bench-run)
    exec "${NODE_RUN[@]}" bench/src/run.ts "$@"
    ;;
  cli)
    exec "${NODE_RUN[@]}" apps/cli/src/main.ts "$@"
    ;;
  pack)
    # The installable tarballs of the TypeScript client and the CLI (built first by their
    # prepack): pm-client-<version>.tgz and pm-cli-<version>.tgz in the given folder.
    dest="${1:-.}"
    mkdir -p "$dest"
    exec pnpm --filter @pm/client --filter @pm/cli pack --pack-destination "$(cd "$dest" && pwd)"
    ;;
  turbo)
    exec pnpm turbo "$@"
    ;;
  *)
    echo "usage: scripts/run.sh start|test|bench-invoke|bench-run|cli|pack|turbo ..." >&2
    exit 2
    ;;
esac
