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
  # pnpm may write the lockfile a moment after .modules.yaml: mark the install as the newer.
  touch node_modules/.modules.yaml
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
    # Type checks, lint and unit tests of every package, then the tests that use real servers
    # and processes. Where the time goes and why it is spent this way: CONTRIBUTING.md, "How long
    # npm test takes".
    started=$(date +%s)
    # Node's compile cache for every Node process of the run, tsc and vitest included, and every
    # service the tests start (packages/testkit childEnv): a service start otherwise compiles its
    # modules and strips its TypeScript anew (about 40 % of a start's CPU; CONTRIBUTING.md, "How
    # long npm test takes").
    export NODE_COMPILE_CACHE="${NODE_COMPILE_CACHE:-$ROOT/node_modules/.cache/node-compile-cache}"
    # Password hashes made during the tests cost 2^10 rather than 2^15 (identity's
    # PASSWORD_HASH_COST): each sign-up, sign-in and refused password of the suite hashes once.
    export PASSWORD_HASH_COST="${PASSWORD_HASH_COST:-10}"
    # The services, the embedded default and the CLI that the tests start as processes (about
    # 250 starts) start from bundles built once a run from their sources
    # (packages/testkit/src/bundles.ts): a start then costs about half the CPU of one that
    # resolves and loads some 320 modules. PM_TEST_BUNDLES=0 starts the sources instead.
    export PM_TEST_BUNDLES="${PM_TEST_BUNDLES:-1}"
    # The browser tests check every page at both widths with axe-core but write no screenshots
    # (e2e/src/dashboardPage.ts, SHOTS_WANTED): PM_TEST_SHOTS=1 writes them to e2e/.screenshots/,
    # as a browser test file run on its own does.
    export PM_TEST_SHOTS="${PM_TEST_SHOTS:-0}"
    find . -path ./node_modules -prune -o -type d -name .test-results -prune -exec rm -rf {} + 2>/dev/null || true
    # Biome once over the whole repository (biome.json at the root): its import-cycle rule builds
    # the project's module graph, which a run per package built again each time (17 runs: about
    # 160 s of CPU, against 10 s for this one). Before the unit tests, whose layer rule test plants
    # violations in the tree for a moment (infra/tests/test/layers.test.ts).
    lint_rc=0
    pnpm exec biome check . || lint_rc=$?
    # One type check of every Node package together (tsconfig.check.json: each shared source
    # checked once, not once per package importing it), then the dashboard (DOM, JSX) with its
    # own tsconfig, both beside turbo's unit tests. TypeScript 7 (the native compiler), one
    # thread each: the unit tests keep the other cores busy (about 13 s of CPU for both, against
    # 48 s with TypeScript 5.9; CONTRIBUTING.md, "How long npm test takes").
    { pnpm exec tsc -p tsconfig.check.json --singleThreaded &&
      pnpm exec tsc -p apps/dashboard/tsconfig.json --noEmit --singleThreaded; } &
    tsc_pid=$!
    # Every package's unit tests in one Vitest run (vitest.config.ts, a project per package):
    # a run per package (turbo) started a pnpm, a Vitest and workers importing the same modules
    # again for each, about half the unit tests' CPU.
    unit_rc=$lint_rc
    pnpm exec vitest run || unit_rc=$?
    tsc_rc=0
    wait "$tsc_pid" || tsc_rc=$?
    [ "$tsc_rc" -eq 0 ] || echo "type check failed (pnpm exec tsc -p tsconfig.check.json, or -p apps/dashboard/tsconfig.json)" >&2
    [ "$unit_rc" -eq 0 ] && [ "$tsc_rc" -eq 0 ] || exit 1
    # Integration tests, every package's in one Vitest run too: every test file gets its own NATS
    # and Redis (PM_TEST_PRIVATE_SERVERS, packages/testkit/src/privateServers.ts), so four files
    # of any packages run at a time (vitest.base.ts). The Python client's tests (not Vitest) run
    # beside them; their output follows Vitest's.
    export PM_TEST_PRIVATE_SERVERS=1
    int_rc=0
    mkdir -p .test-results
    bash clients/python/run-tests.sh > .test-results/python.log 2>&1 &
    python_pid=$!
    VITEST_INT=1 pnpm exec vitest run int.test || int_rc=$?
    python_rc=0
    wait "$python_pid" || python_rc=$?
    echo "The Python client's tests (clients/python/run-tests.sh):"
    cat .test-results/python.log
    [ "$python_rc" -eq 0 ] || { echo "the Python client's tests failed (exit $python_rc)" >&2; int_rc=1; }
    PM_TEST_STARTED="$started" node scripts/test-summary.mjs
    exit "$int_rc"
    ;;
  bench-invoke)
    exec "${NODE_RUN[@]}" bench/src/invoke.ts "$@"
    ;;
  bench-run)
    exec "${NODE_RUN[@]}" bench/src/run.ts "$@"
    ;;
  bench-tracing-instructions)
    exec "${NODE_RUN[@]}" bench/src/tracing-instructions.ts "$@"
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
  lint)
    # Biome over the whole repository at once (the same check npm test runs first).
    exec pnpm exec biome check "$@" .
    ;;
  turbo)
    exec pnpm turbo "$@"
    ;;
  *)
    echo "usage: scripts/run.sh start|test|lint|bench-invoke|bench-run|bench-tracing-instructions|cli|pack|turbo ..." >&2
    exit 2
    ;;
esac
