#!/usr/bin/env bash
# Install everything mcprec's tests need (Python deps in .venv, Node peers in node_modules)
# and run the whole test suite. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then "$PY" -m venv .venv; fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e '.[test]'
npm ci --no-audit --no-fund --loglevel=error
exec .venv/bin/python -m pytest "$@"
