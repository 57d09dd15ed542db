#!/usr/bin/env bash
# The Python client's tests, as CI runs them (`test:int` of this folder's package.json): installs
# the package into a throwaway virtual environment the way a user would, offline
# (`pip install --no-build-isolation`: the build uses the system's setuptools, no index), then
# runs the tests against that installed copy. They start the embedded default themselves.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# Debian's python3 by default: it has python3-setuptools and python3-wheel (the setuptools of
# older Pythons needs wheel to build); PYTHON=... picks another.
if [ -z "${PYTHON:-}" ]; then
  if [ -x /usr/bin/python3 ]; then PYTHON=/usr/bin/python3; else PYTHON=python3; fi
fi
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
"$PYTHON" -m venv --system-site-packages "$WORK/venv"
"$WORK/venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-build-isolation \
  --no-index --no-deps "$HERE"
# From this folder (not src/), so `import prompt_service` finds the installed package.
cd "$HERE"
status=0
"$WORK/venv/bin/python" -m tests.run || status=$?
# The type check of the typed package, where mypy is installed (Debian: apt-get install mypy).
if "$PYTHON" -m mypy --version >/dev/null 2>&1; then
  MYPYPATH="$HERE/src" "$PYTHON" -m mypy --strict --python-version 3.9 -p prompt_service -p tests
else
  echo "mypy is not installed: the type check of clients/python is skipped" >&2
fi
exit "$status"
